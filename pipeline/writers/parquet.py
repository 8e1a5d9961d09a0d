"""Shard writer: one unit's rows of one table as zstd Parquet with deterministic names.

Names are `part-{unit:05d}-{seq:04d}.parquet`, so a retried unit overwrites its own shards and never
adds new ones (`remove_stale_shards` deletes those a dead attempt wrote beyond the retry's). Each shard
is written under a temporary name and renamed into place, so a reader never sees a partial file. Row
groups are sized for streaming by estimated uncompressed bytes.
"""

import hashlib
import itertools
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

ROW_GROUP_BYTES = 96 << 20
SHARD_BYTES = 512 << 20


@dataclass(frozen=True)
class ShardInfo:
    """What the manifest records of one shard; `path` is relative to the dataset root.

    In a unit's completion record a shard may also be a *slice* of a compacted file (pipeline/engine/
    compaction.py): the unit's `rows` rows from row `offset` on, of a file of `file_rows` rows whose size
    and digest are `bytes` and `sha256`. A plain shard has neither field (and `as_dict` omits them).
    """

    path: str
    rows: int
    bytes: int
    sha256: str
    offset: int | None = None
    file_rows: int | None = None

    def as_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @property
    def is_slice(self) -> bool:
        return self.offset is not None

    def file(self) -> "ShardInfo":
        """The whole file this shard or slice lies in, as the manifest lists it."""
        return self if self.offset is None else ShardInfo(self.path, self.file_rows or 0, self.bytes, self.sha256)


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


def write_merged_shard(
    fs: pafs.FileSystem,
    root: str,
    relative: str,
    schema: pa.Schema,
    parts: Iterable[pa.Table],
    zstd_level: int = 3,
    row_group_bytes: int = ROW_GROUP_BYTES,
) -> ShardInfo:
    """Write the concatenation of `parts` (each in `schema`) as one file at `relative`, streaming: a row group
    is flushed each time about `row_group_bytes` (uncompressed) have gathered, so memory stays at one row
    group plus one part whatever the file's size. Temp name, then rename; the same parts give the same bytes."""
    final = f"{root}/{relative}"
    fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
    temporary = temporary_path(final)
    rows = 0
    with fs.open_output_stream(temporary) as sink:
        writer = pq.ParquetWriter(sink, schema, compression="zstd", compression_level=zstd_level, write_statistics=True)
        pending: list[pa.Table] = []
        pending_bytes = 0

        def flush() -> None:
            nonlocal pending, pending_bytes
            if pending:
                group = pa.concat_tables(pending)
                writer.write_table(group, row_group_size=max(1, group.num_rows))
            pending, pending_bytes = [], 0

        for part in parts:
            step = rows_per_group(part, row_group_bytes)
            for offset in range(0, part.num_rows, step):
                piece = part.slice(offset, step)
                if pending and pending_bytes + piece.nbytes > row_group_bytes:
                    flush()
                pending.append(piece)
                pending_bytes += piece.nbytes
                rows += piece.num_rows
        flush()
        writer.close()
    fs.move(temporary, final)
    size, digest = _size_and_digest(fs, final)
    return ShardInfo(relative, rows, size, digest)


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
