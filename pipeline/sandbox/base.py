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
    name = "abstract"
    # The directory each command may write, private to it and on a size-capped filesystem; None: no such place.
    scratch: ClassVar[str | None] = None
    # The command's stdout/stderr are files it could open by path until the backend seals them (docker: after
    # its first stderr write); a command told so (TRACEGEN_SEAL_STREAMS) waits for that before running others' code.
    seals_streams: ClassVar[bool] = False

    @property
    def python(self) -> str:
        """The Python interpreter to run inside this sandbox (the host's, unless the backend differs)."""
        return os.path.realpath(sys.executable)

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

    def check(self) -> None:
        """Raise SetupError, naming the fix, if this backend cannot run commands on this machine."""


@dataclass
class CommandSandbox(Sandbox):
    """A backend that wraps argv in a host command line, run with prlimit and killed by process group."""

    @abstractmethod
    def command(
        self, argv: list[str], binds: list[Bind], env: dict[str, str], cwd: str, limits: SandboxLimits
    ) -> list[str]:
        """The full host command line that runs argv inside this sandbox."""

    def prepare(self, binds: list[Bind]) -> None:
        """Hook run before each command, e.g. to hand writable binds to the sandbox user."""

    def check(self) -> None:
        if shutil.which("prlimit") is None:
            raise SetupError(f"sandbox {self.name!r} needs prlimit: install util-linux (apt-get install util-linux)")

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
        binds = list(binds)
        self.prepare(binds)
        command = rlimit_prefix(limits) + self.command(list(argv), binds, dict(env or {}), cwd, limits)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
            )
            cause = None
            try:
                process.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                cause = f"wall-clock limit of {limits.wall_s:g}s exceeded"
            finally:
                kill_group(process.pid)
                process.wait()
            wall_s = time.monotonic() - start
            code = process.returncode
            if cause is None and code == -signal.SIGXFSZ:
                cause = f"output limit of {limits.file_bytes} bytes exceeded"
            elif cause is None and code < 0:
                cause = f"killed by signal {signal.Signals(-code).name}"
            return SandboxResult(
                code, cause, wall_s, tail(out, limits.output_tail_bytes), tail(err, limits.output_tail_bytes)
            )


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
