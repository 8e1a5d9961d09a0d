"""The sandbox interface: run one command under isolation and resource limits, report how it ended.

Every backend takes the same request (argv, read-only and writable binds, environment, limits; never a
network: installs reach the package index through the host's index proxy) and returns a `SandboxResult`.
Paths are the same inside and outside the sandbox, so a caller never translates them. Bulky results go to
files in a writable bind; stdout/stderr are diagnostics whose tail is kept. The wall-clock limit is enforced
from the parent by killing the whole process group.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.engine.errors import SetupError

CLOSE_GRACE_S = 1.0


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed command."""

    wall_s: float = 60.0
    memory_bytes: int = 2 << 30
    cpu_s: int = 120
    nproc: int = 128
    file_bytes: int = 64 << 20
    output_tail_bytes: int = 64 << 10

    def __post_init__(self):
        for name in ("wall_s", "memory_bytes", "cpu_s", "nproc", "file_bytes", "output_tail_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox limit {name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Bind:
    """A host path made visible at the same path inside the sandbox."""

    path: str
    writable: bool = False


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed command ended. `cause` names why it did not exit by itself, else None."""

    returncode: int
    cause: str | None
    wall_s: float
    stdout_tail: bytes = b""
    stderr_tail: bytes = b""

    @property
    def ok(self) -> bool:
        return self.cause is None and self.returncode == 0

    def describe(self) -> str:
        """One line for a failures row: the cause and the end of stderr."""
        tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()[-3:]
        what = self.cause or f"exit status {self.returncode}"
        return what + (": " + " | ".join(tail) if tail else "")


@dataclass
class Sandbox(ABC):
    """Runs untrusted commands under isolation and limits; one subclass per backend."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    # The interpreter to run inside (a real path, pipeline/sandbox/interpreters.py); None: the backend's own.
    interpreter: str | None = None
    name = "abstract"
    # The directory each command may write, private to it and on a size-capped filesystem; None: no such place.
    scratch: ClassVar[str | None] = None
    # The command's stdout/stderr are files it could open by path until the backend seals them (docker: after
    # its first stderr write); a command told so (TRACEGEN_SEAL_STREAMS) waits for that before running others' code.
    seals_streams: ClassVar[bool] = False
    # The command has a network namespace of its own, loopback only: a connection to 127.0.0.1 or ::1 inside it
    # reaches nothing outside, so a test's own server on loopback harms no one.
    private_network: ClassVar[bool] = False

    @property
    def python(self) -> str:
        """The Python interpreter to run inside this sandbox: the chosen one, else the host's (a backend may
        differ: docker runs its image's)."""
        return self.interpreter or os.path.realpath(sys.executable)

    @abstractmethod
    def run(
        self,
        argv: list[str],
        *,
        binds: Sequence[Bind] = (),
        env: dict[str, str] | None = None,
        cwd: str = "/",
        limits: SandboxLimits | None = None,
    ) -> SandboxResult:
        """Run argv to completion or to the wall-clock limit; never raises for what the command does."""

    @abstractmethod
    def start(
        self,
        argv: list[str],
        *,
        binds: Sequence[Bind] = (),
        env: dict[str, str] | None = None,
        cwd: str = "/",
        limits: SandboxLimits | None = None,
    ) -> "SandboxProcess":
        """Start argv as a long-lived command with pipes for its stdin and stdout (`SandboxProcess`), under
        the same isolation and limits as `run` but no wall clock: the caller stops it."""

    def check(self) -> None:
        """Raise SetupError, naming the fix, if this backend cannot run commands on this machine."""


class SandboxProcess(ABC):
    """A sandboxed command that runs until it is stopped, talked to over its stdin and stdout: two pipes,
    held here as non-blocking descriptors (`stdin` to write, `stdout` to read). It has no wall clock of its
    own: the caller stops it (`stop` kills everything in it) and says why."""

    stdin: int
    stdout: int
    _stopped: SandboxResult | None = None

    def stop(self, cause: str | None = None) -> SandboxResult:
        """Close the pipes, kill every process of the sandbox, and say how it ended (with `cause`, when the
        caller stopped it for one, and the tail of its stderr). Stopping it again gives the same result."""
        if self._stopped is None:
            self._stopped = self._stop(cause)
        return self._stopped

    @abstractmethod
    def _stop(self, cause: str | None) -> SandboxResult:
        """What `stop` does, once."""


@dataclass
class CommandSandbox(Sandbox):
    """A backend that wraps argv in a host command line, run with prlimit and killed by process group."""

    @abstractmethod
    def command(
        self, argv: list[str], binds: list[Bind], env: dict[str, str], cwd: str, limits: SandboxLimits, uid: int
    ) -> list[str]:
        """The full host command line that runs argv inside this sandbox as `uid` (where it sets one)."""

    def prepare(self, binds: list[Bind], uid: int) -> None:
        """Hook run before each command, e.g. to hand writable binds to the sandbox user."""

    def uid(self, long_lived: bool) -> int:
        """The uid a command runs as where this backend sets one (see `bwrap.sandbox_uid`)."""
        return os.getuid()

    def released(self, uid: int) -> None:
        """Hook run after a command was killed, e.g. to wait until its processes are gone."""

    def check(self) -> None:
        if shutil.which("prlimit") is None:
            raise SetupError(f"sandbox {self.name!r} needs prlimit: install util-linux (apt-get install util-linux)")

    def _launch(self, argv, binds, env, cwd, limits, long_lived, **streams) -> tuple[subprocess.Popen, int]:
        binds = list(binds)
        uid = self.uid(long_lived)
        self.prepare(binds, uid)
        command = rlimit_prefix(limits) + self.command(list(argv), binds, dict(env or {}), cwd, limits, uid)
        return subprocess.Popen(command, start_new_session=True, **streams), uid

    def run(
        self,
        argv: list[str],
        *,
        binds: Sequence[Bind] = (),
        env: dict[str, str] | None = None,
        cwd: str = "/",
        limits: SandboxLimits | None = None,
    ) -> SandboxResult:
        limits = limits or self.limits
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            process, uid = self._launch(
                argv, binds, env, cwd, limits, False, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
            cause = None
            try:
                process.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                cause = f"wall-clock limit of {limits.wall_s:g}s exceeded"
            finally:
                kill_group(process.pid)
                process.wait()
                self.released(uid)
            return SandboxResult(
                process.returncode,
                cause or exit_cause(process.returncode, limits),
                time.monotonic() - start,
                tail(out, limits.output_tail_bytes),
                tail(err, limits.output_tail_bytes),
            )

    def start(
        self,
        argv: list[str],
        *,
        binds: Sequence[Bind] = (),
        env: dict[str, str] | None = None,
        cwd: str = "/",
        limits: SandboxLimits | None = None,
    ) -> SandboxProcess:
        """As Sandbox.start; the command runs as its own uid, apart from `run`'s (see `uid`)."""
        limits = limits or self.limits
        err = tempfile.TemporaryFile()
        try:
            process, uid = self._launch(
                argv, binds, env, cwd, limits, True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
            )
        except BaseException:
            err.close()
            raise
        return _CommandProcess(self, process, uid, err, limits)


class _CommandProcess(SandboxProcess):
    def __init__(self, sandbox: CommandSandbox, process: subprocess.Popen, uid: int, err, limits: SandboxLimits):
        self._sandbox, self._process, self._uid, self._err, self._limits = sandbox, process, uid, err, limits
        self._start = time.monotonic()
        assert process.stdin is not None and process.stdout is not None
        self.stdin, self.stdout = process.stdin.fileno(), process.stdout.fileno()
        os.set_blocking(self.stdin, False)
        os.set_blocking(self.stdout, False)

    def _stop(self, cause: str | None) -> SandboxResult:
        process = self._process
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
        if cause is None:  # closing its stdin ends it; whatever is left is killed
            try:
                process.wait(timeout=CLOSE_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        kill_group(process.pid)
        process.wait()
        self._sandbox.released(self._uid)
        with self._err:
            return SandboxResult(
                process.returncode,
                cause or exit_cause(process.returncode, self._limits),
                time.monotonic() - self._start,
                b"",
                tail(self._err, self._limits.output_tail_bytes),
            )


def exit_cause(returncode: int, limits: SandboxLimits) -> str | None:
    """Why a command that was not stopped for a reason of ours ended, or None when it exited by itself."""
    if returncode == -signal.SIGXFSZ:
        return f"output limit of {limits.file_bytes} bytes exceeded"
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    return None


def rlimit_prefix(limits: SandboxLimits) -> list[str]:
    """prlimit(1) sets the limits on the sandbox's first process; its children inherit them."""
    return [
        "prlimit",
        f"--as={limits.memory_bytes}",
        f"--cpu={limits.cpu_s}",
        f"--nproc={limits.nproc}",
        f"--fsize={limits.file_bytes}",
        "--core=0",
        "--",
    ]


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def tail(handle, limit: int) -> bytes:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - limit))
    return handle.read()
