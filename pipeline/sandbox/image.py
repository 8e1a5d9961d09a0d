"""The docker backend's image: built from the Dockerfile, tagged by content, built once per machine.

The tag is a hash of everything the build reads (the Dockerfile, every file under tracers/, the build args),
so editing any of them builds a new image while an unchanged tree finds its image in the engine and builds
nothing. The build context is made here from exactly those files (never the whole repository), so the hash
and the build agree. Within a process the answer is remembered; across processes on one machine a file lock
makes one worker build while the others wait.

A base image named `tracegen-base:<suite>` is local by convention: when the engine lacks it, it is built from
Debian packages by docker/build-base.sh (debootstrap, needs root). Any other base is pulled by the build.
"""

import fcntl
import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

from pipeline.engine.errors import SetupError

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
TRACERS = ROOT / "tracers"
BUILD_BASE = ROOT / "docker" / "build-base.sh"
REPOSITORY = "tracegen-sandbox"
LOCAL_BASE_PREFIX = "tracegen-base:"
DEFAULT_BASE_IMAGE = LOCAL_BASE_PREFIX + "bookworm"
ENGINE_HINT = "start dockerd (or point DOCKER_HOST at an engine) or choose --sandbox bwrap"

_ensured: dict[tuple, str] = {}
_ensured_lock = threading.Lock()


def connect(timeout: float = 30.0):
    """A docker-py client to the engine named by the environment (DOCKER_HOST or the local socket).

    Raises SetupError saying what to do when docker-py is missing or no engine answers."""
    try:
        import docker
    except ImportError as error:
        raise SetupError("sandbox 'docker' needs the docker package (pip install docker)") from error
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except Exception as error:  # DockerException, requests errors, a missing socket: all mean "no engine"
        raise SetupError(f"sandbox 'docker': no Docker engine answers ({error}); {ENGINE_HINT}") from error
    return client


def context_files() -> list[tuple[str, Path]]:
    """(name in the build context, host path) of every file the build reads, in a stable order."""
    files = [("Dockerfile", DOCKERFILE)]
    for path in sorted(TRACERS.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((path.relative_to(ROOT).as_posix(), path))
    return files


def build_args(base_image: str, go_image: str | None) -> dict[str, str]:
    """The Dockerfile's build args; GO_IMAGE unset means no Go toolchain in the image."""
    return {"BASE_IMAGE": base_image, **({"GO_IMAGE": go_image} if go_image else {})}


def image_tag(base_image: str = DEFAULT_BASE_IMAGE, go_image: str | None = None) -> str:
    """`tracegen-sandbox:<hash>`, the hash covering the context files and the build args."""
    digest = hashlib.sha256()
    for name, value in sorted(build_args(base_image, go_image).items()):
        digest.update(f"arg {name}={value}\0".encode())
    for name, path in context_files():
        data = path.read_bytes()
        digest.update(f"file {name} {len(data)}\0".encode())
        digest.update(data)
    return f"{REPOSITORY}:{digest.hexdigest()[:16]}"


def build_context() -> bytes:
    """The build context as an uncompressed tar of `context_files()`, with fixed owners and times."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, path in context_files():
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def image_exists(client, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_base_image(client, base_image: str = DEFAULT_BASE_IMAGE) -> None:
    """Build a local `tracegen-base:<suite>` with docker/build-base.sh when the engine lacks it.

    Other bases are left to the build, which pulls them. Raises SetupError with the script's output."""
    if not base_image.startswith(LOCAL_BASE_PREFIX) or image_exists(client, base_image):
        return
    suite = base_image[len(LOCAL_BASE_PREFIX) :]
    done = subprocess.run([str(BUILD_BASE), base_image, suite], capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(
            f"building the sandbox base image {base_image} failed (docker/build-base.sh, exit "
            f"{done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}"
        )


def build_image(client, tag: str, base_image: str, go_image: str | None) -> None:
    """Build the Dockerfile into `tag`; raises RuntimeError carrying the end of the build log."""
    log = []
    stream = client.api.build(
        fileobj=io.BytesIO(build_context()),
        custom_context=True,
        tag=tag,
        buildargs=build_args(base_image, go_image),
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            log.append(chunk["error"])
            raise SetupError(f"building the sandbox image {tag} failed: " + "".join(log[-20:]).strip())
        log.append(chunk.get("stream", ""))
    if not image_exists(client, tag):
        raise SetupError(f"building the sandbox image {tag} ended without the image: " + "".join(log[-20:]).strip())


def ensure_image(client, base_image: str = DEFAULT_BASE_IMAGE, go_image: str | None = None) -> str:
    """The tag of the sandbox image for this tree and these build args, building it (and its local base)
    when the engine lacks it. Cheap after the first call in a process; safe from many processes at once."""
    key = (base_image, go_image, client.api.base_url)
    with _ensured_lock:
        if key in _ensured:
            return _ensured[key]
        tag = image_tag(base_image, go_image)
        if not image_exists(client, tag):
            with open(os.path.join(tempfile.gettempdir(), "tracegen-sandbox-image.lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not image_exists(client, tag):
                    ensure_base_image(client, base_image)
                    build_image(client, tag, base_image, go_image)
        _ensured[key] = tag
        return tag
