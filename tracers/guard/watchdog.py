"""The per-test watchdog that the suite cannot reach: the runner process that pytest runs under.

`tracers.runners.repos trace` is this supervisor. It starts pytest (`tracers.runners.repos pytest`) as its child and
reads one progress line per test boundary from a pipe (`S <nodeid>` when a test starts, `E <nodeid>` when
it ends, nodeids JSON-quoted). A test that runs past its budget (`test_timeout_s` plus the in-process
guard's grace, so the guard's gentler abort goes first), or a silence that long after the suite closed
the pipe, ends the run: the supervisor kills pytest, prints one verdict line on its own stdout
(`{"watchdog": "timeout", "nodeid", "budget_s"}`) and exits with WATCHDOG_EXIT. The sandbox then ends
everything the suite started (the supervisor is its first process), and the host runs the remaining
tests in a fresh sandbox (pipeline/stages/repos/suite_run.py).

The suite runs as the same uid and so can still kill the supervisor; that too ends the sandbox at once
and the host restarts after the test that was running, blaming it. What the suite cannot do is keep a
test running past its budget, or lose the tests after it. The supervisor is not dumpable
(PR_SET_DUMPABLE 0): the suite cannot ptrace it or open its descriptors through /proc.
Standard library only.
"""

import ctypes
import json
import os
import select
import subprocess
import sys
import time

from tracers.json_writers import encode_object

WATCHDOG_EXIT = 71
PR_SET_DUMPABLE = 4
MAX_LINE = 1 << 16


def _not_dumpable():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Progress:
    """The test running now, from the progress lines read so far; `last` is when the last line came."""

    def __init__(self):
        self.current = None
        self.started = time.monotonic()
        self.last = self.started
        self.closed = False
        self._buffer = b""

    def feed(self, data):
        self.last = time.monotonic()
        if not data:
            self.closed = True
            return
        self._buffer = (self._buffer + data)[-MAX_LINE:]
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            kind, _, name = line.partition(b" ")
            try:
                nodeid = json.loads(name)
            except ValueError:
                continue
            if kind == b"S" and isinstance(nodeid, str):
                self.current, self.started = nodeid, self.last
            elif kind == b"E" and nodeid == self.current:
                self.current = None

    def overdue(self, budget_s):
        """The nodeid (or a description) of what ran past `budget_s`, else None."""
        now = time.monotonic()
        if self.current is not None and now - self.started > budget_s:
            return self.current
        if self.closed and now - self.last > budget_s:
            return self.current or "(the suite closed the watchdog's pipe)"
        return None


def supervise(argv, budget_s, poll_s=0.1):
    """Run `argv` (pytest's runner; its last argument is appended: the progress pipe's descriptor) and
    return its exit status, or end the process with WATCHDOG_EXIT when a test overruns (see above)."""
    _not_dumpable()
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(argv + [str(write_fd)], pass_fds=(write_fd,), stdin=subprocess.DEVNULL)
    os.close(write_fd)
    progress = Progress()
    while True:
        if not progress.closed:
            ready, _, _ = select.select([read_fd], [], [], poll_s)
            if ready:
                progress.feed(os.read(read_fd, 4096))
        else:
            time.sleep(poll_s)
        status = child.poll()
        if status is not None:
            return status
        overdue = progress.overdue(budget_s)
        if overdue is not None:
            child.kill()  # what it started dies with the sandbox, whose first process exits next
            child.wait()
            verdict = {"watchdog": "timeout", "nodeid": overdue, "budget_s": budget_s}
            sys.stdout.write(json.dumps(verdict) + "\n")
            sys.stdout.flush()
            os._exit(WATCHDOG_EXIT)


def report(fd, kind, nodeid):
    """Write one progress line (the pytest side); a closed or full pipe is ignored."""
    try:
        os.write(fd, kind + b" " + encode_object(nodeid).encode("ascii") + b"\n")
    except (OSError, TypeError, ValueError):
        pass
