"""Reading what a sandbox wrote: the sandboxed code owns those directories and may plant links there."""

import os
import stat
from typing import BinaryIO


def open_sandbox_file(path: str) -> BinaryIO | None:
    """The file at `path` opened for reading, or None when it is absent, a link, or not a regular file.

    Never follows a symlink (which could point at a host file) and never blocks on a FIFO.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        return None
    return handle


def read_sandbox_file(path: str, limit: int) -> bytes | None:
    """At most `limit` bytes of a sandbox-written regular file, or None (see `open_sandbox_file`)."""
    handle = open_sandbox_file(path)
    if handle is None:
        return None
    with handle:
        return handle.read(limit)
