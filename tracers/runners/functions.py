"""Sandbox entry point for function records: `python -m tracers.runners.functions OUTDIR`, a warm runner fed
one record at a time over its stdin (protocol: tracers/runners/protocol.py).

It reads its settings (`config`: budgets, repr limits, `record_timeout_s`, `check_parity`,
`private_scratch`), traces a fixed warm-up function itself (so what the tracer builds on first use exists
before any fork), then serves `record` commands until its stdin closes. OUTDIR's parent is the records'
writable scratch (their cwd, HOME and TMPDIR; in bwrap and docker the sandbox's size-capped private /tmp);
for each record the runner makes OUTDIR afresh and creates the record's files in it itself: `NNNNNN.out`
(its stdout and stderr) and `NNNNNN.trace`, which the record's forked child writes as JSON lines: a header
object, event arrays, and an end object.

What keeps records apart (tracers/guard/isolation.py), on every backend, with or without root: the runner is not
dumpable and a child subreaper, and it never holds a record's data — the child reads its own record from
the runner's stdin and the runner sends the trace from file to pipe with sendfile — so a record's child,
a fork of the runner, finds nothing of another record in its memory. The child drops every descriptor but
its own files and makes itself non-dumpable before the record's code runs; the runner waits up to
`record_timeout_s` (or until the scratch is full), SIGKILLs every process the record left behind, sends
`trace N` and `ended N` (how the child ended; the host adds the end object a killed child did not write),
removes the record's files and, when anything else is left in the scratch (on the private tmpfs: more
inodes in use than before the record), empties it in a separate child, so no name a record chose passes
through the runner either; then `done N`. No record can change what was sent for an earlier one, see one,
or leave a process to the next; a record can still kill or stop the runner, but the host then blames the
record in flight (`start` without `done`) and starts a fresh runner for the next.

With `check_parity`, the end object also holds `result` (the rendered return value or exception), and the
runner asks the host (`traced N`) whether to run the record again untraced: for a call that ended by itself
the host sends the record again and a fresh child writes `NNNNNN.parity`: `{"type": "parity", "exit",
"result"}`. The host compares the two. Standard library only.
"""

import builtins
import gc
import json
import os
import select
import signal
import sys
import threading
import time

from tracers.guard import isolation
from tracers.guard.seal import sealed
from tracers.json_writers import encode_object
from tracers.reprs import objstate
from tracers.reprs.saferepr import Limits, SafeRepr
from tracers.runners import protocol
from tracers.runners.protocol import ProtocolError, ResultStream
from tracers.trace import backends, monitoring_tools
from tracers.trace.backends import call_arguments, source_lines
from tracers.trace.tamper import arm_guard, disarm_guard
from tracers.trace.tracer import Budgets

RECORD_FILENAME = "<tracegen>"
TERM_GRACE_S = 0.2
POLL_S = 0.05  # how often a waiting runner checks whether the scratch is full
TRACE_SLACK_BYTES = 1 << 20  # read past max_bytes: end objects and a torn line
PARITY_LIMIT_BYTES = 1 << 16
RECORD_FRAMES = 991  # recursion limit above the record's caller: 1,000 less the chunked runner's frames below it
_PLAIN_ARGS = frozenset(map(id, (str, int, float, bool, type(None), bytes)))
# Traced once by the runner itself before any record: what the tracer builds lazily on its first trace is
# then built before every fork, not once per record's child.
WARM_UP = {
    "id": "warm-up",
    "code": "def f(n):\n    seen = {}\n    for i in range(n):\n        seen[str(i)] = [i, i / 2, (i,)]\n"
    "    try:\n        return seen['x']\n    except KeyError as error:\n        return len(seen), error\n",
    "input": "3",
    "entry": "f",
}


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


def _give_the_record_its_stack():
    """Set the recursion limit to RECORD_FRAMES above this frame: a record gets the same stack wherever the
    runner calls it from, so a refactor of the runner moves no trace's recursion_limit cut."""
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    sys.setrecursionlimit(depth + RECORD_FRAMES)


def _trace_record(record, budgets, limits, out, check_parity, backend):
    """Child side: compile, evaluate the input, trace the entry call. Writes the end object."""
    write = _line_writer(out)
    loaded = _load_record(record, write)
    if loaded is None:
        return
    entry, args, kwargs, lines = loaded
    tracer = backends.tracer_class(backend)(
        is_traced=lambda c: c.co_filename == RECORD_FILENAME,
        source_line=lambda c, n: lines[n - 1] if 0 < n <= len(lines) else "",
        write=write,
        flush=out.flush,
        budgets=budgets,
        limits=limits,
    )
    write(encode_object({"type": "start"}))
    out.flush()
    _give_the_record_its_stack()
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
    _give_the_record_its_stack()
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


def _read_record(length):
    """Child side: the record's own payload, read from the runner's stdin before anything else."""
    payload = protocol.read_exact(0, length)
    if len(payload) != length:
        raise SystemExit("runner: the record's payload ended early")
    return json.loads(payload)


def _run_child(length, budgets, limits, trace_fd, output_fd, check_parity, backend):
    record = _read_record(length)
    null = _isolate(output_fd, trace_fd)
    with open(trace_fd, "w", encoding="ascii", buffering=1 << 16) as out:
        _guard_trace_file(out, null)
        out.write(
            json.dumps(
                {
                    "type": "header",
                    "id": record.get("id"),
                    "tracer_version": backends.tracer_version(backend),
                    "tracer_backend": backend,
                    "python": "%d.%d.%d" % sys.version_info[:3],
                    "repr_mode": limits.mode,
                }
            )
            + "\n"
        )
        _trace_record(record, budgets, limits, out, check_parity, backend)
        out.flush()


def _run_parity_child(length, limits, parity_fd, output_fd):
    record = _read_record(length)
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


def _scratch_full(scratch_fd):
    return os.fstatvfs(scratch_fd).f_bavail == 0


def _inodes_used(scratch_fd):
    info = os.fstatvfs(scratch_fd)
    return info.f_files - info.f_ffree


class _Runner:
    """Runs the records the host sends, one after another, each in its own child."""

    def __init__(self, settings, out_dir, stream):
        self.budgets = Budgets(**settings.get("budgets", {}))
        self.limits = Limits(**settings.get("limits", {}))
        self.timeout_s = float(settings.get("record_timeout_s", self.budgets.max_seconds + 2.0))
        self.check_parity = bool(settings.get("check_parity"))
        # auto: sys.monitoring where this interpreter has it (3.12+), else settrace
        self.backend = backends.resolve_backend(settings.get("tracer_backend"))
        self.trace_limit = self.budgets.max_bytes + TRACE_SLACK_BYTES
        self.scratch_fd = os.open(os.path.dirname(out_dir) or ".", os.O_RDONLY | os.O_DIRECTORY)
        self.out_name = os.path.basename(out_dir)
        self.stream = stream
        # On the sandbox's private tmpfs, a scratch holding no inode but its baseline holds nothing of a
        # record's: the runner then never lists (so never reads) what a record left there.
        self.private = bool(settings.get("private_scratch"))
        self._empty()
        self.baseline = _inodes_used(self.scratch_fd) if self.private else None
        with open(os.devnull, "w", encoding="ascii") as sink:
            _trace_record(WARM_UP, self.budgets, self.limits, sink, self.check_parity, self.backend)
        gc.freeze()  # what exists now is never scanned by a child's collector, so its pages stay shared

    def serve(self):
        """Run `record` commands until the host closes the pipe or this runner must stop."""
        number = 0
        while True:
            command = protocol.read_command(0)
            if command is None:
                return
            kind, sent_number, length = command
            if kind != "record" or sent_number != number:
                raise ProtocolError("expected record %d, got %s %d" % (number, kind, sent_number))
            if not self.run(number, length):
                return
            number += 1

    def run(self, number, length):
        """Run record `number` (its child reads its `length` bytes); False when the runner stops here."""
        try:
            os.mkdir(self.out_name, 0o700, dir_fd=self.scratch_fd)
            out_fd = os.open(self.out_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.scratch_fd)
            self.stream.send("start", number)
            files = _RecordFiles(out_fd, number)
            try:
                self._trace(number, length, files)
            finally:
                files.close()
                removed = files.remove_all()
                os.close(out_fd)
            self._clear(removed)
            self.stream.send("done", number)
        except OSError as error:
            print("runner: records %d onward need a fresh sandbox: %r" % (number, error), file=sys.stderr)
            self.stream.restart(number)
            return False
        return True

    def _trace(self, number, length, files):
        output_fd, trace_fd = files.create("out"), files.create("trace")
        if output_fd is None or trace_fd is None:
            raise OSError("the files of record %d cannot be created" % number)
        reason = self._in_child(
            _run_child, (length, self.budgets, self.limits, trace_fd, output_fd, self.check_parity, self.backend)
        )
        if reason == "scratch_full":
            self.stream.send("scratch", number)
            return
        if not files.still_named("trace"):
            self.stream.send("replaced", number)
            return
        self.stream.send_file("trace", number, trace_fd, self.trace_limit)
        self.stream.send("ended", number, reason.encode("ascii"))
        if self.check_parity:
            self.stream.send("traced", number)
            kind, sent_number, length = protocol.read_command(0) or ("", -1, 0)
            if kind not in ("parity", "finish") or sent_number != number:
                raise ProtocolError("expected parity or finish %d, got %r %d" % (number, kind, sent_number))
            if kind == "parity":
                parity_fd = files.create("parity")
                if parity_fd is None:
                    raise OSError("the parity file of record %d cannot be created" % number)
                self._in_child(_run_parity_child, (length, self.limits, parity_fd, output_fd))
                self.stream.send_file("parity", number, parity_fd, PARITY_LIMIT_BYTES)

    def _clear(self, removed):
        """Leave the scratch as the record found it, its own files `removed`: empty it (in a child, so no name
        a record chose passes through this process) unless nothing else is left."""
        if removed and self._out_dir_removed() and self.baseline == _inodes_used(self.scratch_fd):
            return
        if not self.private:
            self._empty()
            return
        self._in_child(_empty_scratch, (self.scratch_fd,))
        if self.baseline != _inodes_used(self.scratch_fd):
            raise OSError("the scratch directory could not be emptied")

    def _out_dir_removed(self):
        try:
            os.rmdir(self.out_name, dir_fd=self.scratch_fd)
        except OSError:
            return False
        return True

    def _empty(self):
        isolation.empty_directory(self.scratch_fd)

    def _in_child(self, run, args):
        """Run `run(*args)` in a forked child until it ends, `timeout_s` passes or the scratch is full; then kill
        every process left behind. Returns why it ended (`child_exit_N`, `killed_by_signal_N`,
        `wall_time_kill`, `scratch_full`)."""
        pid = _fork()
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


def _skip(*args):
    """What threading's after-fork fixup runs as in the runner's own forks."""


def _fork():
    """os.fork without `threading`'s after-fork fixup of its thread table, which matters only when the
    forking process has other threads (the runner never has) and costs a child ~110 page faults, a third of
    an empty child's cost; each child gets it back for the forks of its own record."""
    fixup = getattr(threading, "_after_fork", None)
    if fixup is None:
        return os.fork()
    code, fixup.__code__ = fixup.__code__, _skip.__code__
    try:
        return os.fork()
    finally:
        fixup.__code__ = code


def _empty_scratch(scratch_fd):
    """Cleaner child: remove whatever a record left in the scratch."""
    isolation.die_with_parent()
    isolation.empty_directory(scratch_fd)


class _RecordFiles:
    """The files of record `number` in OUTDIR: created by the runner, closed and removed after the record."""

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

    def remove_all(self):
        """Unlink the names of the runner's files; False when one is no longer a plain name to unlink."""
        removed = True
        for kind in self._fds:
            try:
                os.unlink(self._name(kind), dir_fd=self._dir_fd)
            except OSError:
                removed = False
        return removed


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
    (out_dir,) = argv
    isolation.await_sealed_streams()  # first: /proc/self/fd is read before the runner turns non-dumpable
    isolation.untraceable()
    isolation.become_subreaper()
    kind, _, length = protocol.read_command(0) or ("", 0, 0)
    if kind != "config":
        raise ProtocolError("the first command must be config, got %r" % kind)
    settings = json.loads(protocol.read_exact(0, length))
    monitoring_tools.install_guards()  # before any record runs: records may not touch sys.monitoring (3.12+)
    _Runner(settings, out_dir, ResultStream(1)).serve()


if __name__ == "__main__":
    sealed(globals())["main"](sys.argv[1:])  # the record's patches of modules and builtins reach none of it
