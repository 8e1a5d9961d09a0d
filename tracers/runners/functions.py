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
from tracers.reprs.saferepr import Limits
from tracers.runners import protocol
from tracers.runners.protocol import ProtocolError, ResultStream
from tracers.runners.record import run_child, run_parity_child, trace_record
from tracers.trace import backends, monitoring_tools
from tracers.trace.tracer import Budgets

TERM_GRACE_S = 0.2
POLL_S = 0.05  # how often a waiting runner checks whether the scratch is full
TRACE_SLACK_BYTES = 1 << 20  # read past max_bytes: end objects and a torn line
PARITY_LIMIT_BYTES = 1 << 16
# Traced once by the runner itself before any record: what the tracer builds lazily on its first trace is
# then built before every fork, not once per record's child.
WARM_UP = {
    "id": "warm-up",
    "code": "def f(n):\n    seen = {}\n    for i in range(n):\n        seen[str(i)] = [i, i / 2, (i,)]\n"
    "    try:\n        return seen['x']\n    except KeyError as error:\n        return len(seen), error\n",
    "input": "3",
    "entry": "f",
}


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
            trace_record(WARM_UP, self.budgets, self.limits, sink, self.check_parity, self.backend)
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
            run_child, (length, self.budgets, self.limits, trace_fd, output_fd, self.check_parity, self.backend)
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
                self._in_child(run_parity_child, (length, self.limits, parity_fd, output_fd))
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
