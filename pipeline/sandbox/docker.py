"""The `docker` backend: one throwaway container per command, through the Docker API (docker-py).

Each container: the sandbox image (pipeline/sandbox/image.py), a read-only root, a private /tmp (tmpfs), the
caller's binds at their own paths (only those asked writable are), a non-root per-worker uid, every capability
dropped, no-new-privileges, Docker's default seccomp profile, memory (no swap), pids and CPU limits in its
cgroup, rlimits for file size, CPU time and open files, and no network (the install step reaches the index
through the host's index proxy, pipeline/sandbox/index_proxy.py). A tiny
init (Docker's, `init=True`) is PID 1, so signals and exit statuses behave as they do outside. The wall clock
is enforced from here: past it the container is killed. The container is always removed. The environment is
exactly PATH, HOME=/tmp and what the caller gives.

stdout and stderr go to two files in a private host directory bound into the container, under the file size
rlimit, so printing without end costs at most `file_bytes` of disk per stream and no engine log; the backend
keeps their tails. Once the command has written to stderr, both files become root's with mode 0600: what the
command opened keeps writing, but nothing else in the container can open them by path (the function runner,
told by TRACEGEN_SEAL_STREAMS, waits for this before any record runs, so a record cannot forge the frames
of the records after it).
Containers carry the label `org.tracegen.sandbox`, so a crashed host process leaves
nothing that `docker container prune --filter label=org.tracegen.sandbox` cannot find.

Go: when the image carries no Go toolchain (Dockerfile GO_IMAGE unset) and the host has one at `goroot`
(default /usr/local/go), it is bound read-only at the same path, and /usr/local/go/bin is on the default PATH.
"""

import errno
import os
import shlex
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.engine.errors import SetupError
from pipeline.sandbox.base import Bind, Sandbox, SandboxLimits, SandboxProcess, SandboxResult
from pipeline.sandbox.bwrap import sandbox_uid
from pipeline.sandbox.image import DEFAULT_BASE_IMAGE, connect, ensure_image

IMAGE_PYTHON = "/usr/bin/python3"
DEFAULT_PATH = "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"
LABEL = "org.tracegen.sandbox"
NOFILE = 1024
STREAMS = ("stdin", "stdout", "stderr")
START_TIMEOUT_S = 60.0


@dataclass
class DockerSandbox(Sandbox):
    """Runs commands in containers of the sandbox image.

    image: use this image as it is (a prebuilt tag, e.g. pushed for a cluster); None builds the Dockerfile
    on `base_image` (with Go from `go_image`, if given) and uses the result. Defaults come from the
    environment: TRACEGEN_SANDBOX_IMAGE, TRACEGEN_BASE_IMAGE, TRACEGEN_GO_IMAGE.
    """

    image: str | None = field(default_factory=lambda: os.environ.get("TRACEGEN_SANDBOX_IMAGE") or None)
    base_image: str = field(default_factory=lambda: os.environ.get("TRACEGEN_BASE_IMAGE", DEFAULT_BASE_IMAGE))
    go_image: str | None = field(default_factory=lambda: os.environ.get("TRACEGEN_GO_IMAGE") or None)
    goroot: str | None = "/usr/local/go"
    cpus: float = 1.0
    tmp_bytes: int = 512 << 20
    name = "docker"
    scratch = "/tmp"
    seals_streams = True
    private_network = True  # network_mode="none": a namespace with its own loopback

    def __post_init__(self):
        if self.interpreter is not None:
            raise ValueError(
                "sandbox 'docker' runs its image's Python (/usr/bin/python3): choose the interpreter by building "
                "the image on another base (TRACEGEN_BASE_IMAGE), not with --python"
            )
        if self.cpus <= 0 or self.tmp_bytes <= 0:
            raise ValueError(f"cpus and tmp_bytes must be positive, got {self.cpus!r} and {self.tmp_bytes!r}")
        self.client = connect()
        if self.image is None:
            self.image = ensure_image(self.client, self.base_image, self.go_image)
        labels = self._image_labels(self.image)
        self.image_has_go = labels.get("org.tracegen.go-image", "") not in ("", labels.get("org.tracegen.base-image"))

    def _image_labels(self, image: str) -> dict:
        import docker.errors

        try:
            return self.client.images.get(image).labels or {}
        except docker.errors.ImageNotFound as error:
            raise SetupError(
                f"sandbox 'docker': image {self.image!r} is not in the engine; build it "
                "(unset TRACEGEN_SANDBOX_IMAGE to build it from the Dockerfile)"
            ) from error

    @property
    def python(self) -> str:
        return IMAGE_PYTHON

    def uid(self, long_lived: bool = False) -> int:
        """The container's uid: a per-worker unprivileged uid when we are root (a started container's apart
        from one-shot commands', as under bwrap, so neither backend's command waits for the other's
        processes), else our own."""
        return sandbox_uid(long_lived) if os.geteuid() == 0 else os.getuid()

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
        if not argv:
            raise ValueError("sandbox 'docker': argv is empty")
        for bind in binds:
            if not os.path.isabs(bind.path) or not os.path.exists(bind.path):
                raise ValueError(f"sandbox 'docker': bind {bind.path!r} must be an existing absolute path")
        # The streams' files are made and held open here: the command may write them, not replace them (the
        # directory stays root's), and the tails are read through these descriptors, never through a path
        # the command could have turned into a symlink to a host file.
        io_dir = tempfile.mkdtemp(prefix="tracegen-io-")
        try:
            os.chmod(io_dir, 0o755)
            with open(os.path.join(io_dir, "stdout"), "w+b") as out, open(os.path.join(io_dir, "stderr"), "w+b") as err:
                uid = self.uid()
                if os.geteuid() == 0:
                    for path in [out.name, err.name] + [bind.path for bind in binds if bind.writable]:
                        os.chown(path, uid, uid)
                container = self._create(argv, binds, dict(env or {}), cwd, limits, io_dir, uid)
                try:
                    returncode, cause, wall_s, oom = self._start_and_wait(container, limits, (out, err))
                finally:
                    self.remove(container)
                cause = cause or _cause(returncode, oom, limits, out, err)
                return SandboxResult(
                    returncode,
                    cause,
                    wall_s,
                    _tail(out, limits.output_tail_bytes),
                    _tail(err, limits.output_tail_bytes),
                )
        finally:
            shutil.rmtree(io_dir, ignore_errors=True)

    def start(
        self,
        argv: list[str],
        *,
        binds: Sequence[Bind] = (),
        env: dict[str, str] | None = None,
        cwd: str = "/",
        limits: SandboxLimits | None = None,
    ) -> SandboxProcess:
        """As Sandbox.start: stdin and stdout are FIFOs in the io directory (the host holds their other ends),
        stderr a file; all three are sealed (root's, 0600) before this returns, once the command has written
        its first stderr line (TRACEGEN_SEAL_STREAMS), so nothing else in the container can open them."""
        limits = limits or self.limits
        io_dir = tempfile.mkdtemp(prefix="tracegen-io-")
        try:
            os.chmod(io_dir, 0o755)
            for name in ("stdin", "stdout"):
                os.mkfifo(os.path.join(io_dir, name), 0o600)
            err = open(os.path.join(io_dir, "stderr"), "w+b")  # noqa: SIM115 (held by the process object)
            stdout = os.open(os.path.join(io_dir, "stdout"), os.O_RDONLY | os.O_NONBLOCK)
            fds = [stdout, err.fileno()]
            uid = self.uid(long_lived=True)
            if os.geteuid() == 0:
                for path in [os.path.join(io_dir, name) for name in STREAMS] + [b.path for b in binds if b.writable]:
                    os.chown(path, uid, uid)
            container = self._create(list(argv), list(binds), dict(env or {}), cwd, limits, io_dir, uid)
            process = _ContainerProcess(self, container, io_dir, err, stdout, limits)
        except BaseException:
            shutil.rmtree(io_dir, ignore_errors=True)
            raise
        try:
            container.start()
            process.stdin = _open_fifo_writer(os.path.join(io_dir, "stdin"), time.monotonic() + START_TIMEOUT_S)
            fds.append(process.stdin)
            ended = threading.Event()
            timer = threading.Timer(START_TIMEOUT_S, ended.set)
            timer.start()
            seal_streams(fds, ended)
            timer.cancel()
        except BaseException:
            process.stop("the container did not start")
            raise
        return process

    def create_kwargs(
        self,
        argv: list[str],
        binds: list[Bind],
        env: dict[str, str],
        cwd: str,
        limits: SandboxLimits,
        io_dir: str,
        uid: int,
    ) -> dict:
        """The arguments of `containers.create` for one command run as `uid` (everything the isolation
        consists of)."""
        from docker.types import Mount, Ulimit

        mounts = [Mount(io_dir, io_dir, type="bind")]
        given = {os.path.normpath(bind.path) for bind in binds}  # a caller's bind wins over these defaults
        if self.goroot and not self.image_has_go and os.path.isdir(self.goroot) and self.goroot not in given:
            mounts.append(Mount(self.goroot, self.goroot, type="bind", read_only=True))
        mounts += [Mount(bind.path, bind.path, type="bind", read_only=not bind.writable) for bind in binds]
        environment = {"PATH": DEFAULT_PATH, "HOME": "/tmp", **env}
        for key in environment:
            if not key or "=" in key or "\0" in key + environment[key]:
                raise ValueError(f"sandbox 'docker': bad environment variable {key!r}")
        # sh points the streams at the io directory's files (or FIFOs); env -i then gives the command exactly
        # this environment.
        redirect = " ".join(
            f"{fd}{'<' if name == 'stdin' else '>'}{shlex.quote(os.path.join(io_dir, name))}"
            for fd, name in enumerate(STREAMS)
            if os.path.exists(os.path.join(io_dir, name))
        )
        redirect = f'exec "$@" {redirect}'
        command = [
            "/bin/sh",
            "-c",
            redirect,
            "sh",
            "/usr/bin/env",
            "-i",
            *(f"{key}={value}" for key, value in environment.items()),
            *argv,
        ]
        memory = limits.memory_bytes
        return dict(
            image=self.image,
            command=command,
            entrypoint=[],
            working_dir=cwd,
            user=f"{uid}:{uid}",
            environment={"PATH": DEFAULT_PATH, "HOME": "/tmp"},
            labels={LABEL: "1"},
            hostname="sandbox",
            init=True,
            detach=True,
            stdin_open=False,
            tty=False,
            network_mode="none",
            read_only=True,
            mounts=mounts,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={min(self.tmp_bytes, memory)},mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            ipc_mode="private",
            mem_limit=memory,
            memswap_limit=memory,
            shm_size=min(64 << 20, memory),
            oom_score_adj=1000,
            pids_limit=limits.nproc,
            nano_cpus=int(self.cpus * 1e9),
            ulimits=[
                Ulimit(name="fsize", soft=limits.file_bytes, hard=limits.file_bytes),
                Ulimit(name="cpu", soft=limits.cpu_s, hard=limits.cpu_s + 1),
                Ulimit(name="nofile", soft=NOFILE, hard=NOFILE),
                Ulimit(name="core", soft=0, hard=0),
            ],
            log_config={"type": "none", "config": {}},
        )

    def _create(self, argv, binds, env, cwd, limits, io_dir, uid):
        import docker.errors

        kwargs = self.create_kwargs(list(argv), binds, env, cwd, limits, io_dir, uid)
        try:
            return self.client.containers.create(**kwargs)
        except docker.errors.DockerException as error:
            raise RuntimeError(f"sandbox 'docker': the engine refused to create the container: {error}") from error

    def _start_and_wait(self, container, limits: SandboxLimits, streams) -> tuple[int, str | None, float, bool]:
        """Start, wait up to the wall clock, kill past it; returns (exit status, cause, seconds, OOM killed).
        Meanwhile the streams are sealed as soon as the command has written to stderr (`seal_streams`)."""
        import docker.errors
        import requests.exceptions

        cause = None
        ended = threading.Event()
        sealer = threading.Thread(target=seal_streams, args=([s.fileno() for s in streams], ended), daemon=True)
        try:
            start = time.monotonic()
            container.start()
            sealer.start()
            try:
                status = container.wait(timeout=limits.wall_s)
            except requests.exceptions.RequestException:
                cause = f"wall-clock limit of {limits.wall_s:g}s exceeded"
                try:
                    container.kill()
                except docker.errors.APIError:
                    pass  # it ended by itself meanwhile
                status = container.wait(timeout=60)
            wall_s = time.monotonic() - start
            container.reload()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            raise RuntimeError(f"sandbox 'docker': the engine failed while running the container: {error}") from error
        finally:
            ended.set()
            if sealer.is_alive():
                sealer.join()
        state = container.attrs.get("State", {})
        return int(status.get("StatusCode", -1)), cause, wall_s, bool(state.get("OOMKilled"))

    def remove(self, container) -> None:
        import docker.errors

        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError:
            pass  # e.g. "removal already in progress"; the label lets a prune find any leftover


class _ContainerProcess(SandboxProcess):
    def __init__(self, sandbox: DockerSandbox, container, io_dir: str, err, stdout: int, limits: SandboxLimits):
        self._sandbox, self._container, self._io_dir, self._err, self._limits = sandbox, container, io_dir, err, limits
        self.stdout, self.stdin = stdout, -1
        self._start = time.monotonic()

    def _stop(self, cause: str | None) -> SandboxResult:
        import docker.errors
        import requests.exceptions

        for fd in (self.stdin, self.stdout):
            if fd >= 0:
                os.close(fd)
        self.stdin = self.stdout = -1
        container, returncode, oom = self._container, -1, False
        try:
            try:
                container.wait(timeout=1.0 if cause is None else 0.01)  # a closed stdin ends the runner
            except requests.exceptions.RequestException:
                try:
                    container.kill()
                except docker.errors.APIError:
                    pass  # it ended by itself meanwhile
            returncode = int(container.wait(timeout=60).get("StatusCode", -1))
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            pass
        finally:
            self._sandbox.remove(container)
        with self._err as err:
            result = SandboxResult(
                returncode,
                cause or _cause(returncode, oom, self._limits, err),
                time.monotonic() - self._start,
                b"",
                _tail(err, self._limits.output_tail_bytes),
            )
        shutil.rmtree(self._io_dir, ignore_errors=True)
        return result


def _open_fifo_writer(path: str, deadline: float) -> int:
    """The write end of the FIFO at `path`, non-blocking, once the container's side has it open to read."""
    while True:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO or time.monotonic() > deadline:
                raise RuntimeError(f"sandbox 'docker': the container never opened its stdin ({error})") from error
            time.sleep(0.005)


def _cause(returncode: int, oom: bool, limits: SandboxLimits, *outputs) -> str | None:
    """Why a command that was not killed at the wall clock ended, or None when it exited by itself."""
    if oom:
        return f"out of memory (OOM killed): memory limit of {limits.memory_bytes} bytes"
    if any(os.fstat(handle.fileno()).st_size >= limits.file_bytes for handle in outputs):
        return f"output limit of {limits.file_bytes} bytes exceeded"
    if returncode == 128 + signal.SIGXFSZ:
        return f"file size limit of {limits.file_bytes} bytes exceeded"
    if returncode == 128 + signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_s}s exceeded"
    # Docker's init exits with 128 + the signal that ended the command.
    if 128 < returncode < 128 + signal.NSIG:
        number = returncode - 128
        try:
            return f"killed by signal {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return None


def seal_streams(fds: list[int], ended: threading.Event, poll_s: float = 0.002) -> None:
    """Once the command has written to stderr (`fds[1]`; the function runner's first line, under
    TRACEGEN_SEAL_STREAMS), make every stream (files or FIFOs) root's, mode 0600: the descriptors the command
    opened keep working, but nothing in the container can open them by path any more (tracers/guard/isolation.py
    `await_sealed_streams` waits for it)."""
    while not ended.is_set() and os.fstat(fds[1]).st_size == 0:
        time.sleep(poll_s)
    for fd in fds:
        if os.geteuid() == 0:
            os.fchown(fd, 0, 0)
        os.fchmod(fd, 0o600)


def _tail(handle, limit: int) -> bytes:
    size = os.fstat(handle.fileno()).st_size
    handle.seek(max(0, size - limit))
    return handle.read(limit)
