"""Package-index source distributions as repositories: `[[repo]] sdist = "name==version"`.

The host fetches the sdist itself, and runs none of its code: no `pip download` (which runs the build backend
to prepare metadata). `index` finds the sdist file of exactly that version on the index pip would use,
`archive` unpacks it safely, `cache` downloads and verifies it once per machine and serves its tree as a
checkout.

Errors are SdistError with `kind` SdistNotFound (no such project, version or sdist file), SdistRejected (a
hash mismatch, an unsafe or oversized archive) or SdistUnreachable (the index could not be read).
"""

from typing import Protocol

CHUNK = 1 << 16


class SdistError(Exception):
    """The sdist could not be had; `kind` names why (for the failures table)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def read_capped(response: Readable, limit: int, sink, what: str) -> int:
    """Copy `response` into `sink(chunk)` until it ends; SdistRejected past `limit` bytes."""
    total = 0
    while chunk := response.read(CHUNK):
        total += len(chunk)
        if total > limit:
            raise SdistError("SdistRejected", f"{what} is larger than {limit:,} bytes; it is not fetched")
        sink(chunk)
    return total
