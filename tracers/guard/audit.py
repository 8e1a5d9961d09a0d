"""Guard a traced test run from inside, so that one bad test costs only itself.

A watchdog aborts a test past `test_timeout_s` and one that floods its output; an audit hook refuses
(and reports) writes outside the scratch directory, the run's copy of the repository (`worktree`), /tmp and
/dev, and into the request's read-only paths (the venv, the tracers: binds that may live under /tmp), and
network connections: all of them, or, with `loopback` in the request (the sandbox has a network namespace of
its own), all but those to 127.0.0.0/8, ::1, the unspecified address and `localhost`. It reports the suite's
`sys.settrace` calls made while the tracer's hook is not installed: the suite turned it off earlier in the
test and puts another hook (or the tracer's, saved) back. A call made while the tracer's hook is installed
is not reported here: a suite that saves and restores the hook (doctest's `DocTestRunner.run` does) leaves it
as it was, and one that replaces it is caught by the end-of-test check (tracers/suite/pytest_plugin.py);
`os.fork` is capped per test and refused in forked children (a fork bomb is reported and its
processes killed). The sandbox enforces the same limits from outside; these guards make them visible
as violations and keep the suite going. A suite can still disable this watchdog (it runs in the suite's
process): `tracers.guard.watchdog` enforces the per-test budget from outside it. Standard library only.
"""

import errno
import os
import pathlib
import signal
import socket
import sys
import threading
import time

ABORT_SIGNAL = signal.SIGRTMIN + 7 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR2
ABORT_RESEND_S = 1.0
ABORT_GRACE_S = 5.0
HUNG_EXIT = 70


class TestAborted(BaseException):
    """Raised into a test that ran too long or flooded its output (a BaseException: tests cannot catch
    it with `except Exception`)."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {
    "os.mkdir": (0,),
    "os.rmdir": (0,),
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
}
_WATCHED = frozenset(["open", "socket.connect", "socket.sendto", "os.fork", "sys.settrace"] + list(_PATH_EVENTS))
MAX_VIOLATIONS_PER_KIND = 20
_PURE_PATHS = frozenset(map(id, (pathlib.PosixPath, pathlib.PurePosixPath)))
_sleep = time.sleep  # bound before any conftest runs, like everything the watchdog calls per tick
_settrace = sys.settrace


def _plain_path(path):
    """The path as str when it is a str or bytes (subclasses copied without calling them), else None.

    A path-like object of the program's own class is not asked for its path: that would run its
    `__fspath__`, which the program itself already ran once to open the file. The sandbox's read-only
    binds refuse such a write all the same; it is only not reported as a violation.
    """
    kind = type(path)
    if kind is str or kind is bytes:
        return os.fsdecode(path)
    if issubclass(kind, str):
        return str.__str__(path)
    if issubclass(kind, bytes):
        return os.fsdecode(bytes(bytes.__getitem__(path, slice(None))))
    if id(kind) in _PURE_PATHS:
        return str.__str__(os.fspath(path))  # pathlib's own classes: their __fspath__ is the standard library's
    return None


def _plain(value):
    """A str, bytes or int as its exact type (the program's own subclasses are not called), else None."""
    kind = type(value)
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, bytes):
        return bytes.__getitem__(value, slice(None))
    if issubclass(kind, bytearray):
        return bytes(bytearray.__getitem__(value, slice(None)))
    if issubclass(kind, int):
        return int.__index__(value)
    return None


def _host(address):
    """An internet address's host as a str, else None."""
    host = _plain(tuple.__getitem__(address, 0)) if tuple.__len__(address) else None
    if type(host) is bytes:
        return host.decode("ascii", "replace")
    return host if type(host) is str else None


def _loopback(address):
    """Whether a connection to `address` (a socket address tuple) stays on this host's loopback: 127.0.0.0/8,
    ::1, the unspecified address (Linux connects it to the host itself), an IPv4-mapped one of those, or
    `localhost`."""
    host = _host(address)
    if host is None:
        return False
    host = host.split("%", 1)[0]  # an IPv6 scope
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except (OSError, ValueError):
        return False
    if len(packed) == 16:
        if packed[:15] == bytes(15) and packed[15] in (0, 1):
            return True
        if packed[:12] != bytes(10) + b"\xff\xff":
            return False
        packed = packed[12:]
    return packed[0] == 127 or packed == bytes(4)


def _shown(address):
    """The address's first two items as text for a violation."""
    items = [_plain(tuple.__getitem__(address, index)) for index in range(min(2, tuple.__len__(address)))]
    return "(%s)" % ", ".join(map(repr, items))


class Guard:
    """Per-test limits enforced from inside the test process (see the module docstring)."""

    def __init__(self, sink, tracer, request, log_fd):
        self.sink = sink
        self.tracer = tracer
        writable = [request["scratch"], request["worktree"]]
        self.writable = tuple(os.path.join(os.path.realpath(path), "") for path in writable + ["/tmp", "/dev"]) + (
            "/proc/self/",
        )
        # Read-only binds may live under /tmp too (the sandbox's /tmp is private, its binds are not).
        inside = [os.path.join(os.path.realpath(path), "") for path in writable]
        self.read_only = tuple(
            os.path.join(os.path.realpath(path), "")
            for path in [request.get("venv") or ""] + list(request.get("read_only") or [])
            if path and not any(root.startswith(os.path.join(os.path.realpath(path), "")) for root in inside)
        )
        self.loopback = bool(request.get("loopback"))
        self.test_timeout_s = float(request["test_timeout_s"])
        self.max_log_bytes = int(request["max_log_bytes"])
        self.max_forks = int(request["max_forks_per_test"])
        self.log_fd = log_fd
        self.main_pid = os.getpid()
        self.main_thread = threading.main_thread().ident
        self.current = None
        self.started = 0.0
        self.aborted_at = None
        self._last_signal = 0.0
        self.forks = 0
        self.fork_bomb = False
        self.children = []
        self.in_child = False
        self._busy = False
        self._tracer_reported = False
        self._counts = {}
        self._lock = threading.Lock()

    # -- violations ---------------------------------------------------------------------------------------
    def violation(self, kind, detail):
        if self.in_child:
            return
        count = self._counts.get(kind, 0) + 1
        self._counts[kind] = count
        if count <= MAX_VIOLATIONS_PER_KIND:
            self.sink.obj(type="violation", kind=kind, nodeid=self.current, detail=str(detail)[:1000])

    def tracer_disabled(self, detail):
        """Report, once per test, that the suite turned the tracer off (its calls after that are missing)."""
        if self.current is not None and not self._tracer_reported:
            self._tracer_reported = True
            self.violation("tracer_disabled", detail)

    # -- test boundaries --------------------------------------------------------------------------------
    def test_started(self, nodeid):
        with self._lock:
            self.current = nodeid
            self.started = time.monotonic()
            self.aborted_at = None
            self.forks = 0
            self.fork_bomb = False
            self._tracer_reported = False

    def test_finished(self, nodeid):
        with self._lock:
            self.current = None
            self.aborted_at = None
        if self.fork_bomb:
            for pid in self.children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for pid in self.children:
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                pass
        self.children = []

    # -- the watchdog ----------------------------------------------------------------------------------
    def watch(self):
        while True:
            _sleep(0.05)
            try:
                self._check()
            except Exception:
                pass

    def _check(self):
        flooded = False
        try:
            if os.fstat(self.log_fd).st_size > self.max_log_bytes:
                os.ftruncate(self.log_fd, 0)
                os.write(self.log_fd, b"[tracegen: output truncated: more than %d bytes]\n" % self.max_log_bytes)
                flooded = True
        except OSError:
            pass
        with self._lock:
            if self.current is None:
                return
            now = time.monotonic()
            if self.aborted_at is None:
                if flooded:
                    self._abort("output_flood", "test wrote more than %d bytes of output" % self.max_log_bytes)
                elif now - self.started > self.test_timeout_s:
                    self._abort("timeout", "test ran longer than test_timeout_s=%g" % self.test_timeout_s)
                return
            if now - self.aborted_at > ABORT_GRACE_S:
                self.sink.obj(
                    type="end", exitstatus=None, reason="hung: %s did not stop after it was aborted" % self.current
                )
                self.sink.flush()
                os._exit(HUNG_EXIT)
            if now - self._last_signal > ABORT_RESEND_S:
                self._signal()

    def _abort(self, kind, detail):
        self.tracer.halt("test_timeout" if kind == "timeout" else kind)
        self.violation(kind, detail)
        self.aborted_at = time.monotonic()
        self._signal()

    def _signal(self):
        self._last_signal = time.monotonic()
        try:
            signal.pthread_kill(self.main_thread, ABORT_SIGNAL)
        except OSError:
            pass

    def on_abort_signal(self, signum, frame):
        if self.current is not None and self.aborted_at is not None and not self.in_child:
            raise TestAborted("tracegen: test aborted (%s)" % self._abort_kind())

    def _abort_kind(self):
        return self.tracer.halted or "aborted"

    # -- the audit hook and fork ------------------------------------------------------------------------
    def audit(self, event, args):
        if event not in _WATCHED or self._busy:
            return
        self._busy = True
        try:
            if event == "open":
                flags = args[2] if len(args) > 2 else 0
                if isinstance(flags, int) and flags & _WRITE_FLAGS:
                    self._check_path(args[0], "open for writing")
            elif event in _PATH_EVENTS:
                for position in _PATH_EVENTS[event]:
                    self._check_path(args[position], event)
            elif event in ("socket.connect", "socket.sendto"):
                address = args[1] if len(args) > 1 else None
                if issubclass(type(address), tuple) and not (self.loopback and _loopback(address)):
                    shown = _shown(address)
                    self.violation("network", "%s to %s" % (event, shown))
                    raise ConnectionRefusedError(
                        errno.ECONNREFUSED,
                        "tracegen: network access is off while tests are traced (%s %s)" % (event, shown),
                    )
            elif event == "os.fork":
                self._check_fork()
            elif event == "sys.settrace":
                tracer = self.tracer
                if (
                    tracer.uses_settrace
                    and tracer.tracing
                    and not tracer.switching
                    and threading.get_ident() == self.main_thread
                    and not tracer.intact()  # the hook installed before this call, not the one it sets
                ):
                    self.tracer_disabled("the suite called sys.settrace after it had turned the tracer off")
        finally:
            self._busy = False

    def _check_path(self, path, what):
        path = _plain_path(path)
        if path is None:
            return
        full = os.path.join(os.path.realpath(path), "")
        if full.startswith(self.writable) and not full.startswith(self.read_only):
            return
        self.violation("write", "%s %s" % (what, path))
        raise PermissionError(errno.EACCES, "tracegen: writing outside the scratch directory is refused", path)

    def _check_fork(self):
        if self.in_child:
            raise PermissionError(errno.EAGAIN, "tracegen: a process forked by a test may not fork again")
        self.forks += 1
        if self.forks > self.max_forks:
            if not self.fork_bomb:
                self.fork_bomb = True
                self.violation("fork_bomb", "test forked more than %d times" % self.max_forks)
            raise PermissionError(errno.EAGAIN, "tracegen: fork limit of %d per test reached" % self.max_forks)

    def after_fork_child(self, null_fd, sink_fd):
        _settrace(None)
        self.in_child = True
        try:
            os.dup2(null_fd, sink_fd)
        except OSError:
            pass

    def install(self, real_fork):
        guard = self

        def fork():
            pid = real_fork()
            if pid > 0:
                guard.children.append(pid)
            return pid

        os.fork = fork
        sys.addaudithook(self.audit)
        signal.signal(ABORT_SIGNAL, self.on_abort_signal)
        threading.Thread(target=self.watch, name="tracegen-watchdog", daemon=True).start()
