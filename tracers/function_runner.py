"""Sandbox entry point for function records: `python -m tracers.function_runner REQUEST OUTDIR`.

REQUEST is a JSON file `{"records": [{"id", "code", "input", "entry"}], "budgets": {...}, "limits": {...},
"record_timeout_s": float, "check_parity": bool}`. OUTDIR's parent is the records' writable scratch (their
cwd, HOME and TMPDIR; in bwrap and docker the sandbox's size-capped private /tmp), emptied before each
record; OUTDIR is made afresh in it for each record, and holds the files the runner creates for it. Each
record runs in its own forked child, which writes `OUTDIR/NNNNNN.trace` as JSON lines: a header object,
event arrays, and an end object. What comes out is the result stream on stdout
(tracers/result_stream.py), never a file a record could reach.

Records share the sandbox's uid; what keeps them apart is the runner (tracers/isolation.py), chosen over a
uid per record because it holds on every backend, with or without root: the runner is not dumpable and a
child subreaper; before a record starts it empties the scratch, creates the record's files itself, sends
`start N`; the child drops every descriptor but its own files and makes itself non-dumpable before the
record's code runs; the runner waits up to `record_timeout_s` (or until the scratch is full), SIGKILLs every
process the record left behind, reads the trace through its own descriptor and sends it, then `done N`. So
no record can change what was sent for an earlier one, and no process of it survives into the next; a
record can still kill or stop the runner, but the host then blames the record in flight (`start` without
`done`) and runs the rest again. When the child did not write its end object (killed, crashed, out of
memory) the runner adds one.

With `check_parity`, the end object also holds `result` (the rendered return value or exception), and a
record whose traced call ended by itself (exit normal or error) is run once more, untraced, in a fresh
child, which writes `OUTDIR/NNNNNN.parity`: `{"type": "parity", "exit", "result"}`. The host compares the
two. Standard library only.
"""

import builtins
import json
import os
import select
import signal
import sys
import threading
import time

from tracers import isolation, objstate
from tracers.pytrace import (
    TRACER_VERSION,
    Budgets,
    Tracer,
    arm_guard,
    call_arguments,
    disarm_guard,
    encode_object,
    source_lines,
)
from tracers.result_stream import ResultStream, StreamFull
from tracers.saferepr import Limits, SafeRepr
from tracers.seal import sealed

RECORD_FILENAME = "<tracegen>"
TERM_GRACE_S = 0.2
POLL_S = 0.05  # how often a waiting runner checks whether the scratch is full
TRACE_SLACK_BYTES = 1 << 20  # read past max_bytes: end objects and a torn line
PARITY_LIMIT_BYTES = 1 << 16
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
    token = arm_guard(_no_trace, threading.get_ident())  # no gc walk to the tracer's state before it runs
    try:
        code = record["code"]
        namespace = {"__name__": "__tracegen__", "__builtins__": builtins.__dict__}  # never the sealed copy
        exec(compile(code, RECORD_FILENAME, "exec"), namespace)
        entry = _entry(namespace, record.get("entry") or "f")
        stage = "input"
        args, kwargs = call_arguments(record["input"], namespace)
    except BaseException as error:
        disarm_guard(token)
        write(
            json.dumps(
                {"type": "failure", "stage": stage, "error_type": type(error).__name__, "message": _message(error)}
            )
        )
        return None
    disarm_guard(token)
    return entry, args, kwargs, source_lines(code)


def _no_trace(reason):
    """A refused call before the trace starts: the refusal itself (TracerTampered) fails the record's setup."""


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
    write(encode_object({"type": "start"}))
    out.flush()
    outcome = tracer.run(entry, args, kwargs)
    end = dict(outcome.as_dict(), type="end")
    if check_parity and outcome.exit != "never":
        end["result"] = SafeRepr(limits)(tracer.result)
    write(encode_object(end))  # bound before the record ran: a patched json.dumps cannot forge it


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
    null = _isolate(output_fd, trace_fd)
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
    null = _isolate(output_fd, parity_fd)
    with open(parity_fd, "w", encoding="ascii") as out:
        _guard_trace_file(out, null)
        _run_untraced(record, limits, out)
        out.flush()


def _isolate(output_fd, own_fd):
    """Before the record's code runs: not dumpable, killed with the runner, its own process group, stdin
    from /dev/null, stdout and stderr to its output file, and no descriptor but these and `own_fd` (the
    runner's result stream and directories are closed)."""
    isolation.untraceable()
    isolation.die_with_parent()
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    low = 3
    for fd in sorted({null, own_fd}):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
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


def _closed(data, reason):
    """The trace `data` with an end object added when the child did not write one (killed, crashed, out of
    memory); a torn last line is left for the host's strict parser to drop."""
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    if last.startswith(b"{") and (b'"type": "end"' in last or b'"type": "failure"' in last):
        return data
    end = (
        {"type": "end", "exit": "never", "truncated": True, "reason": reason}
        if b'"type": "start"' in data[:4096]
        else {"type": "failure", "stage": "setup", "error_type": "Killed", "message": reason}
    )
    torn = data and not data.endswith(b"\n")
    return data + (b"\n" if torn else b"") + json.dumps(end).encode() + b"\n"


def _ended_by_itself(data):
    """Whether the traced call returned or raised (not cut by a budget or killed): only then is there a
    result to compare. The host checks the files again; this only saves a pointless run."""
    try:
        end = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    except ValueError:
        return False
    return type(end) is dict and end.get("type") == "end" and end.get("exit") in ("normal", "error")


def _read(fd, limit):
    """At most `limit` bytes of a record's file, through the runner's own descriptor."""
    chunks, offset = [], 0
    while offset < limit:
        chunk = os.pread(fd, min(1 << 20, limit - offset), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _scratch_full(scratch_fd):
    return os.fstatvfs(scratch_fd).f_bavail == 0


class _Runner:
    """The records of one request, run one after another into the result stream."""

    def __init__(self, request, out_dir, stream):
        self.budgets = Budgets(**request.get("budgets", {}))
        self.limits = Limits(**request.get("limits", {}))
        self.timeout_s = float(request.get("record_timeout_s", self.budgets.max_seconds + 2.0))
        self.check_parity = bool(request.get("check_parity"))
        self.scratch_fd = os.open(os.path.dirname(out_dir) or ".", os.O_RDONLY | os.O_DIRECTORY)
        self.out_name = os.path.basename(out_dir)
        self.stream = stream

    def run(self, number, record):
        """Run record `number` and send its frames; False when the runner stops here (a `restart` frame)."""
        try:
            isolation.empty_directory(self.scratch_fd)
            os.mkdir(self.out_name, 0o700, dir_fd=self.scratch_fd)
            out_fd = os.open(self.out_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.scratch_fd)
            self.stream.send("start", number)
            try:
                self._trace(number, record, out_fd)
            finally:
                os.close(out_fd)
            self.stream.send("done", number)
        except (StreamFull, OSError) as error:
            print("runner: records %d onward need a fresh sandbox: %r" % (number, error), file=sys.stderr)
            self.stream.restart(number)
            return False
        return True

    def _trace(self, number, record, out_fd):
        files = _RecordFiles(out_fd, number)
        try:
            output_fd, trace_fd = files.create("out"), files.create("trace")
            if output_fd is None or trace_fd is None:
                self.stream.send("replaced", number)
                return
            reason = self._in_child(
                _run_child, (record, self.budgets, self.limits, trace_fd, output_fd, self.check_parity)
            )
            if reason == "scratch_full":
                self.stream.send("scratch", number)
                return
            if not files.still_named("trace"):
                self.stream.send("replaced", number)
                return
            data = _closed(_read(trace_fd, self.budgets.max_bytes + TRACE_SLACK_BYTES), reason)
            self.stream.send("trace", number, data)
            parity_fd = files.create("parity") if self.check_parity and _ended_by_itself(data) else None
            if parity_fd is not None:
                self._in_child(_run_parity_child, (record, self.limits, parity_fd, output_fd))
                self.stream.send("parity", number, _read(parity_fd, PARITY_LIMIT_BYTES))
        finally:
            files.close()

    def _in_child(self, run, args):
        """Run `run(*args)` in a forked child until it ends, `timeout_s` passes or the scratch is full; then kill
        every process left behind. Returns why it ended (`child_exit_N`, `killed_by_signal_N`,
        `wall_time_kill`, `scratch_full`)."""
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                run(*args)
            finally:
                os._exit(0)
        reason = self._wait(pid)
        isolation.kill_descendants()
        return "scratch_full" if _scratch_full(self.scratch_fd) else reason

    def _wait(self, pid):
        fd = os.pidfd_open(pid)
        try:
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline and not _scratch_full(self.scratch_fd):
                if select.select([fd], [], [], min(POLL_S, max(0.0, deadline - time.monotonic())))[0]:
                    _, status = os.waitpid(pid, 0)
                    if os.WIFSIGNALED(status):
                        return "killed_by_signal_%d" % os.WTERMSIG(status)
                    return "child_exit_%d" % os.WEXITSTATUS(status)
            os.kill(pid, signal.SIGTERM)  # flushes what was recorded; SIGKILL follows
            select.select([fd], [], [], TERM_GRACE_S)
            return "wall_time_kill"
        finally:
            os.close(fd)


class _RecordFiles:
    """The files of record `number` in OUTDIR: created by the runner, closed after the record."""

    def __init__(self, dir_fd, number):
        self._dir_fd = dir_fd
        self._number = number
        self._fds = {}

    def create(self, kind):
        """The descriptor of the record's new `NNNNNN.kind` file, or None when it cannot be created."""
        try:
            self._fds[kind] = _fresh_file(self._dir_fd, self._name(kind))
        except OSError:
            return None
        return self._fds[kind]

    def still_named(self, kind):
        """Whether `NNNNNN.kind` still names the file the runner created (the record did not replace it)."""
        try:
            named = os.stat(self._name(kind), dir_fd=self._dir_fd, follow_symlinks=False)
        except OSError:
            return False
        own = os.fstat(self._fds[kind])
        return (named.st_dev, named.st_ino) == (own.st_dev, own.st_ino)

    def _name(self, kind):
        return "%06d.%s" % (self._number, kind)

    def close(self):
        for fd in self._fds.values():
            os.close(fd)


def _fresh_file(dir_fd, name):
    """A new, empty file `name` in OUTDIR, opened for the runner; whatever the record's traced run left at
    that name (before its parity run) is moved aside first, never followed."""
    os.fchmod(dir_fd, 0o700)
    try:
        os.rename(name, ".displaced-" + os.urandom(8).hex(), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)


def main(argv):
    request_path, out_dir = argv
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    isolation.await_sealed_streams()  # first: /proc/self/fd is read before the runner turns non-dumpable
    isolation.untraceable()
    isolation.become_subreaper()
    runner = _Runner(request, out_dir, ResultStream(1))
    for number, record in enumerate(request["records"]):
        if not runner.run(number, record):
            break


if __name__ == "__main__":
    sealed(globals())["main"](sys.argv[1:])  # the record's patches of modules and builtins reach none of it
