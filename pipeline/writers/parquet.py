"""Shard writer: one unit's rows of one table as zstd Parquet with deterministic names.

Names are `part-{unit:05d}-{seq:04d}.parquet`, so a retried unit overwrites its own shards and never
adds new ones (`remove_stale_shards` deletes those a dead attempt wrote beyond the retry's). Each shard
is written under a temporary name and renamed into place, so a reader never sees a partial file. Row
groups are sized for streaming by estimated uncompressed bytes.
"""

import hashlib
import itertools
import uuid
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

ROW_GROUP_BYTES = 96 << 20
SHARD_BYTES = 512 << 20


@dataclass(frozen=True)
class ShardInfo:
    """What the manifest records of one shard; `path` is relative to the dataset root."""

    path: str
    rows: int
    bytes: int
    sha256: str

    def as_dict(self) -> dict:
        return asdict(self)


def temporary_path(final: str) -> str:
    """A name to write `final` under before the rename: unique per attempt, so two live attempts of a
    unit never write into one file, hidden (a leading dot: pyarrow.dataset skips it) and not ending in
    `.parquet` (a `*.parquet` glob never matches it)."""
    directory, name = final.rsplit("/", 1)
    return f"{directory}/.tmp-{name}.{uuid.uuid4().hex}"


def shard_name(unit: int, seq: int) -> str:
    return f"part-{unit:05d}-{seq:04d}.parquet"


def rows_per_group(table: pa.Table, target_bytes: int) -> int:
    """Rows per row group so that a group holds about `target_bytes` uncompressed."""
    if table.num_rows == 0:
        return 1
    return max(1, int(target_bytes * table.num_rows / max(1, table.nbytes)))


def write_table_shards(
    fs: pafs.FileSystem,
    root: str,
    table_name: str,
    table: pa.Table,
    unit: int,
    zstd_level: int = 3,
    shard_bytes: int = SHARD_BYTES,
    row_group_bytes: int = ROW_GROUP_BYTES,
) -> list[ShardInfo]:
    """Write `table` (already in its explicit schema) as the shards of `unit`; returns their infos."""
    if table.num_rows == 0:
        return []
    fs.create_dir(f"{root}/{table_name}", recursive=True)
    step = rows_per_group(table, shard_bytes)
    group_rows = rows_per_group(table, row_group_bytes)
    shards = []
    for seq, offset in enumerate(range(0, table.num_rows, step)):
        part = table.slice(offset, step)
        relative = f"{table_name}/{shard_name(unit, seq)}"
        final = f"{root}/{relative}"
        temporary = temporary_path(final)
        with fs.open_output_stream(temporary) as sink:
            pq.write_table(
                part,
                sink,
                compression="zstd",
                compression_level=zstd_level,
                row_group_size=group_rows,
                write_statistics=True,
            )
        fs.move(temporary, final)
        size, digest = _size_and_digest(fs, final)
        shards.append(ShardInfo(relative, part.num_rows, size, digest))
    return shards


def remove_stale_shards(fs: pafs.FileSystem, root: str, table_name: str, unit: int, first_seq: int) -> int:
    """Delete `unit`'s shards of `table_name` numbered from `first_seq` on: what an earlier, dead attempt of
    the unit wrote beyond what this attempt wrote. Returns how many files went. (A dead attempt's
    temporaries are named apart, see `temporary_path`: no reader ever takes them for shards.)

    An attempt writes its shards in sequence, so the probing stops at the first number with neither file;
    only those names are looked up (no directory listing, which costs O(shards) on object stores).
    """
    removed = 0
    for seq in itertools.count(first_seq):
        path = f"{root}/{table_name}/{shard_name(unit, seq)}"
        found = [info.path for info in fs.get_file_info([path]) if info.type == pafs.FileType.File]
        if not found:
            break
        for path in found:
            fs.delete_file(path)
        removed += len(found)
    return removed


def _size_and_digest(fs: pafs.FileSystem, path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with fs.open_input_stream(path) as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()
