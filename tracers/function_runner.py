"""Sandbox entry point for function records: `python -m tracers.function_runner REQUEST OUTDIR`.

REQUEST is a JSON file `{"records": [{"id", "code", "input", "entry"}], "budgets": {...}, "limits": {...},
"record_timeout_s": float, "check_parity": bool}`. Each record runs in its own forked child (so one record
cannot corrupt another, and a C-level hang is killed from outside) and writes `OUTDIR/NNNNNN.trace` as JSON
lines: a header object, event arrays, and an end object. When a child dies or is killed, the runner writes
the end object for it.

OUTDIR exists (the host makes it). The runner opens it once, before any record runs, and creates each record's
files itself, relative to that descriptor, after moving aside whatever an earlier record left at their names
(a directory, a link, a FIFO); the child writes through the descriptors it inherits. So a record that renames,
replaces or pre-plants paths in OUTDIR never redirects another record's output.

With `check_parity`, the end object also holds `result` (the rendered return value or exception), and a
record whose traced call ended by itself (exit normal or error) is run once more, untraced, in a fresh
child, which writes `OUTDIR/NNNNNN.parity`: `{"type": "parity", "exit", "result"}`. The host compares the
two. Standard library only.
"""

import json
import os
import select
import signal
import sys
import threading

from tracers import objstate
from tracers.pytrace import TRACER_VERSION, Budgets, Tracer, call_arguments, source_lines
from tracers.saferepr import Limits, SafeRepr

RECORD_FILENAME = "<tracegen>"
TERM_GRACE_S = 0.2
_PLAIN_ARGS = frozenset(map(id, (str, int, float, bool, type(None), bytes)))


def _line_writer(handle):
    def write(line):
        handle.write(line)
        handle.write("\n")

    return write


def _load_record(record, write):
    """Compile the record and evaluate its input: (entry, args, kwargs, source lines), or None after writing
    a failure object."""
    stage = "setup"
    try:
        code = record["code"]
        namespace = {"__name__": "__tracegen__"}
        exec(compile(code, RECORD_FILENAME, "exec"), namespace)
        entry = _entry(namespace, record.get("entry") or "f")
        stage = "input"
        args, kwargs = call_arguments(record["input"], namespace)
    except BaseException as error:
        write(
            json.dumps(
                {"type": "failure", "stage": stage, "error_type": type(error).__name__, "message": _message(error)}
            )
        )
        return None
    return entry, args, kwargs, source_lines(code)


def _entry(namespace, name):
    """The function the record calls: defined by its code, and callable (else the record fails at setup)."""
    if name not in namespace:
        raise NameError("entry %r is not defined by the code" % name)
    entry = namespace[name]
    if not callable(entry):
        raise TypeError("entry %r is a %s, not a function" % (name, objstate.qualname(type(entry))))
    return entry


def _trace_record(record, budgets, limits, out, check_parity):
    """Child side: compile, evaluate the input, trace the entry call. Writes the end object."""
    write = _line_writer(out)
    loaded = _load_record(record, write)
    if loaded is None:
        return
    entry, args, kwargs, lines = loaded
    tracer = Tracer(
        is_traced=lambda c: c.co_filename == RECORD_FILENAME,
        source_line=lambda c, n: lines[n - 1] if 0 < n <= len(lines) else "",
        write=write,
        flush=out.flush,
        budgets=budgets,
        limits=limits,
    )
    write(json.dumps({"type": "start"}))
    out.flush()
    outcome = tracer.run(entry, args, kwargs)
    end = dict(outcome.as_dict(), type="end")
    if check_parity and outcome.exit != "never":
        end["result"] = SafeRepr(limits)(tracer.result)
    write(json.dumps(end))


def _run_untraced(record, limits, out):
    """Child side of the parity check: the same call without the tracer; writes how it ended."""
    loaded = _load_record(record, lambda line: None)
    if loaded is None:
        return
    entry, args, kwargs, _ = loaded
    try:
        result, exit_ = entry(*args, **kwargs), "normal"
    except BaseException as error:
        result, exit_ = error, "error"
    out.write(json.dumps({"type": "parity", "exit": exit_, "result": SafeRepr(limits)(result)}) + "\n")


def _message(error):
    """A builtin exception's message; a user exception class's type and args (its `__str__` is not run)."""
    try:
        args = BaseException.__dict__["args"].__get__(error)
        if objstate.is_heap(type(error)) or not all(id(type(arg)) in _PLAIN_ARGS for arg in args):
            return SafeRepr()(error)[:2000]
        return ("%s" % (error,))[:2000]
    except BaseException:
        return "<unprintable %s>" % objstate.qualname(type(error))


def _run_child(record, budgets, limits, trace_fd, output_fd, check_parity):
    null = _isolate(output_fd)
    with open(trace_fd, "w", encoding="ascii", buffering=1 << 16) as out:
        _guard_trace_file(out, null)
        out.write(
            json.dumps(
                {
                    "type": "header",
                    "id": record.get("id"),
                    "tracer_version": TRACER_VERSION,
                    "python": "%d.%d.%d" % sys.version_info[:3],
                    "repr_mode": limits.mode,
                }
            )
            + "\n"
        )
        _trace_record(record, budgets, limits, out, check_parity)
        out.flush()


def _run_parity_child(record, limits, parity_fd, output_fd):
    null = _isolate(output_fd)
    with open(parity_fd, "w", encoding="ascii") as out:
        _guard_trace_file(out, null)
        _run_untraced(record, limits, out)
        out.flush()


def _isolate(output_fd):
    """A child's own process group, stdin from /dev/null, stdout and stderr to its output file."""
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a full disk quota is an OSError, not a kill
    return null


def _guard_trace_file(out, null):
    """Keep the trace file whole when the traced code forks or is asked to stop.

    A process forked by the traced code stops tracing and writes its copy of the buffer to /dev/null;
    SIGTERM (sent by the runner before SIGKILL) flushes what was recorded before a C-level hang.
    """

    def after_fork():
        sys.settrace(None)
        threading.settrace(None)
        os.dup2(null, out.fileno())

    def on_term(signum, frame):
        try:
            out.flush()
        finally:
            os._exit(0)

    os.register_at_fork(after_in_child=after_fork)
    signal.signal(signal.SIGTERM, on_term)


def _wait(pid, timeout_s):
    """Wait for a child up to timeout_s; returns its wait status, or None if it had to be killed."""
    fd = os.pidfd_open(pid)
    try:
        return _wait_pidfd(pid, fd, timeout_s)
    finally:
        os.close(fd)


def _wait_pidfd(pid, fd, timeout_s):
    ready, _, _ = select.select([fd], [], [], timeout_s)
    if not ready:
        os.kill(pid, signal.SIGTERM)
        if not select.select([fd], [], [], TERM_GRACE_S)[0]:
            _kill_group(pid)
        os.waitpid(pid, 0)
        _kill_group(pid)
        return None
    _, status = os.waitpid(pid, 0)
    _kill_group(pid)  # anything the record left running in the background
    return status


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _append_end(trace_fd, reason):
    """Close a trace whose child did not write its end object (killed, crashed, or out of memory).

    Written through the runner's own descriptor, never through a path the record could have replaced.
    """
    size = os.fstat(trace_fd).st_size
    tail = os.pread(trace_fd, 4096, max(0, size - 4096))
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    if last.startswith(b"{") and (b'"type": "end"' in last or b'"type": "failure"' in last):
        return
    started = b'"type": "start"' in os.pread(trace_fd, 4096, 0)
    end = (
        {"type": "end", "exit": "never", "truncated": True, "reason": reason}
        if started
        else {"type": "failure", "stage": "setup", "error_type": "Killed", "message": reason}
    )
    torn = tail and not tail.endswith(b"\n")  # a torn last line is dropped by the host's strict parser
    os.pwrite(trace_fd, (b"\n" if torn else b"") + json.dumps(end).encode() + b"\n", size)


def main(argv):
    request_path, out_dir = argv
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    budgets = Budgets(**request.get("budgets", {}))
    limits = Limits(**request.get("limits", {}))
    timeout_s = float(request.get("record_timeout_s", budgets.max_seconds + 2.0))
    check_parity = bool(request.get("check_parity"))
    out_fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    for number, record in enumerate(request["records"]):
        files = _RecordFiles(out_fd, number)
        output_fd, trace_fd = files.create("out"), files.create("trace")
        if output_fd is not None and trace_fd is not None:  # else the host reports the record's missing trace
            _in_child(_run_child, (record, budgets, limits, trace_fd, output_fd, check_parity), trace_fd, timeout_s)
            parity_fd = files.create("parity") if check_parity and _ended_by_itself(trace_fd) else None
            if parity_fd is not None:
                _in_child(_run_parity_child, (record, limits, parity_fd, output_fd), None, timeout_s)
        files.close()


class _RecordFiles:
    """The output files of record `number`: created by the runner, closed after the record."""

    def __init__(self, dir_fd, number):
        self._dir_fd = dir_fd
        self._number = number
        self._fds = []

    def create(self, kind):
        """The descriptor of the record's new `NNNNNN.kind` file, or None when it cannot be created."""
        try:
            self._fds.append(_fresh_file(self._dir_fd, "%06d.%s" % (self._number, kind)))
        except OSError:
            return None
        return self._fds[-1]

    def close(self):
        for fd in self._fds:
            os.close(fd)


def _fresh_file(dir_fd, name):
    """A new, empty file `name` in the output directory, opened for the runner; whatever an earlier record
    left at that name is moved aside first (never followed), and the directory made writable again."""
    os.fchmod(dir_fd, 0o711)
    try:
        os.rename(name, ".displaced-" + os.urandom(8).hex(), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)


def _in_child(run, args, trace_fd, timeout_s):
    """Run `run(*args)` in a forked child, wait for it up to timeout_s, and close its trace if it did not."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            run(*args)
        finally:
            os._exit(0)
    status = _wait(pid, timeout_s)
    if trace_fd is None:
        return
    if status is None:
        _append_end(trace_fd, "wall_time_kill")
    elif os.WIFSIGNALED(status):
        _append_end(trace_fd, "killed_by_signal_%d" % os.WTERMSIG(status))
    else:
        _append_end(trace_fd, "child_exit_%d" % os.WEXITSTATUS(status))


def _ended_by_itself(trace_fd):
    """Whether the traced call returned or raised (not cut by a budget or killed): only then is there a
    result to compare. The host checks the files again; this only saves a pointless run."""
    size = os.fstat(trace_fd).st_size
    last = os.pread(trace_fd, 8192, max(0, size - 8192)).rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        end = json.loads(last)
    except ValueError:
        return False
    return type(end) is dict and end.get("type") == "end" and end.get("exit") in ("normal", "error")


if __name__ == "__main__":
    main(sys.argv[1:])
