"""Dataset versions under one root, published through a commit log (docs/architecture.md §11, Delta Lake's commit rule).

Layout under ROOT:
    versions/{N}/            version N: its own shards, `_units/` completion records, `manifest.json`. Its
                             manifest may also list shards of earlier versions (`../M/traces/...`): what did
                             not change is referenced, never copied. A compacted file of an earlier
                             version is referenced while all the units it holds are unchanged; otherwise
                             its unchanged units are re-written into N's compacted files (refresh/sequence.py).
                             Until N is committed the directory is the staging area of the refresh
                             building it (a killed run's units are reused).
    _log/{N:020d}.json       the commit: version N exists once this file does, and never changes after.
    LATEST                   a hint (the number of the latest version), rewritten after each commit.

Guarantees:
- A version is committed by creating its log file only if it does not exist yet: on a local filesystem a
  complete temporary file is hard-linked to the final name (`link` fails if it exists), so two writers
  racing on N never both succeed and no reader ever sees a partial entry. On an object store the same
  rule needs a conditional put (s3fs `open(path, "xb")`); a filesystem with neither is refused.
- Readers take the highest committed N (never LATEST alone, never an uncommitted directory): reading the
  log and resolving a root to its latest version is pipeline/engine/reader.py's; this module commits and
  retains.
- Retention keeps the last K committed versions, the one LATEST names, and every version whose shards
  a kept manifest lists; a removed version leaves the tables' Delta logs first (pipeline/engine/delta_tables.py:
  their latest versions list none of its files), then loses its log entry, then its directory.
"""

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow.fs as pafs

from pipeline.engine.dataset import create_exclusive, write_text
from pipeline.engine.delta_tables import release
from pipeline.engine.reader import (
    LOG,
    committed_versions,
    log_path,
    read_manifest,
    read_text,
    table_shards,
    version_dir,
)

LATEST = "LATEST"


class CommitConflict(RuntimeError):
    """Another writer committed this version number first."""


def commit_version(fs: pafs.FileSystem, root: str, n: int, entry: dict) -> None:
    """Publish version `n` by creating its log entry exclusively; CommitConflict if it exists already."""
    fs.create_dir(f"{root}/{LOG}", recursive=True)
    try:
        create_exclusive(fs, log_path(root, n), json.dumps(entry, indent=2, sort_keys=True).encode())
    except FileExistsError:
        raise CommitConflict(f"version {n} was committed by another writer") from None


def write_latest(fs: pafs.FileSystem, root: str, n: int) -> None:
    write_text(fs, f"{root}/{LATEST}", f"{n}\n")


def referenced_versions(fs: pafs.FileSystem, version_root: str, manifest: dict) -> set[int]:
    """The versions whose directories hold shards this manifest lists (`../M/...` paths: unit shards and
    compacted files alike)."""
    found = set()
    for table in manifest.get("tables", {}):
        for shard in table_shards(fs, version_root, manifest, table):
            parts = shard["path"].split("/")
            if parts[0] == ".." and len(parts) > 1 and parts[1].isdigit():
                found.add(int(parts[1]))
    return found


def retain(fs: pafs.FileSystem, root: str, keep: int) -> list[int]:
    """Remove committed versions beyond the last `keep`, except LATEST's and those a kept manifest
    references; returns the removed numbers. Call only after the newest commit is confirmed."""
    if type(keep) is not int or keep < 1:
        raise ValueError(f"keep must be an int >= 1, got {keep!r}")
    versions = committed_versions(fs, root)
    kept = set(versions[-keep:])
    hint = (read_text(fs, f"{root}/{LATEST}") or "").strip()
    if hint.isdigit():
        kept.add(int(hint))
    for n in sorted(kept):
        manifest = read_manifest(fs, version_dir(root, n))
        kept |= referenced_versions(fs, version_dir(root, n), manifest or {})
    removed = [n for n in versions if n not in kept]
    release(fs, root, removed)  # the tables' Delta logs first: their latest versions list none of these files
    for n in removed:
        fs.delete_file(log_path(root, n))  # un-commit first: no reader picks a version being deleted
        if fs.get_file_info(version_dir(root, n)).type == pafs.FileType.Directory:
            fs.delete_dir(version_dir(root, n))
    return removed


@contextmanager
def refresh_lock(fs: pafs.FileSystem, root: str) -> Iterator[None]:
    """Hold the root's refresh lock, waiting while another refresh holds it (local roots: an flock the
    kernel drops when its process dies, so a killed refresh never leaves it held). On object stores there
    is no lock: the scheduler serialises runs (concurrencyPolicy: Forbid) and the log's exclusive create
    still keeps two writers from publishing the same N."""
    if not isinstance(fs, pafs.LocalFileSystem):
        yield
        return
    os.makedirs(f"{root}/{LOG}", exist_ok=True)
    with open(f"{root}/{LOG}/.refresh.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
