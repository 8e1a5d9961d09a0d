"""Reading what a sandbox wrote: the sandboxed code owns those directories and may plant links there."""

import os
import stat
from typing import BinaryIO


def open_sandbox_file(path: str, dir_fd: int | None = None) -> BinaryIO | None:
    """The file at `path` (relative to `dir_fd`, if given) opened for reading, or None when it is absent, a
    link, or not a regular file.

    Never follows a symlink in the last component (which could point at a host file), never blocks on a FIFO,
    and checks the type before anything else touches the descriptor.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def read_sandbox_file(path: str, limit: int, dir_fd: int | None = None) -> bytes | None:
    """At most `limit` bytes of a sandbox-written regular file, or None (see `open_sandbox_file`)."""
    handle = open_sandbox_file(path, dir_fd)
    if handle is None:
        return None
    with handle:
        return handle.read(limit)


class SandboxDirectory:
    """A directory the host makes for a sandbox to write into, opened once, by descriptor, before the sandbox runs.

    Every read names one entry of it and goes through that descriptor with no-follow semantics, so nothing
    the sandbox does to paths (renaming the directory, putting a link to a host directory in its place,
    planting links, directories or FIFOs among its entries) makes the host read anything but a regular file
    inside the directory it made.
    """

    def __init__(self, path: str):
        os.mkdir(path, 0o700)
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

    def read(self, name: str, limit: int) -> bytes | None:
        """At most `limit` bytes of the regular file `name` in this directory, or None."""
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"{name!r} is not the name of an entry")
        return read_sandbox_file(name, limit, self.fd)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> "SandboxDirectory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
