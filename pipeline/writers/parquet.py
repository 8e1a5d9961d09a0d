"""Shard writer: one unit's rows of one table, streamed as zstd Parquet with deterministic names.

Names are `part-{unit:05d}-{seq:04d}.parquet`, so a retried unit overwrites its own shards and never
adds new ones (`remove_stale_shards` deletes those a dead attempt wrote beyond the retry's). Each shard
is written under a temporary name and renamed into place, so a reader never sees a partial file. Rows are
written as they arrive (`TableShardWriter`): row groups and shards are cut by estimated uncompressed bytes.
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


class RowGroups:
    """Cuts a stream of tables (one schema) into row groups of about `target_bytes` uncompressed.

    `add` returns the groups its part completed, `finish` the last one: memory is one group plus one part,
    whatever the stream's length, and the same parts always give the same groups."""

    def __init__(self, target_bytes: int):
        self.target_bytes = target_bytes
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0

    def add(self, part: pa.Table) -> list[pa.Table]:
        groups = []
        step = rows_per_group(part, self.target_bytes)
        for offset in range(0, part.num_rows, step):
            piece = part.slice(offset, step)
            if self._pending and self._pending_bytes + piece.nbytes > self.target_bytes:
                groups.extend(self.finish())
            self._pending.append(piece)
            self._pending_bytes += piece.nbytes
        return groups

    def finish(self) -> list[pa.Table]:
        if not self._pending:
            return []
        group = pa.concat_tables(self._pending)
        self._pending, self._pending_bytes = [], 0
        return [group]


class ShardFileWriter:
    """One Parquet file being written: row groups appended under a temporary name (`temporary_path`), renamed
    into place by `close`, which returns its `ShardInfo`; `abort` deletes the temporary."""

    def __init__(self, fs: pafs.FileSystem, root: str, relative: str, schema: pa.Schema, zstd_level: int = 3):
        self.fs, self.relative = fs, relative
        self.final = f"{root}/{relative}"
        fs.create_dir(self.final.rsplit("/", 1)[0], recursive=True)
        self.temporary = temporary_path(self.final)
        self._stream = fs.open_output_stream(self.temporary)
        self._writer = pq.ParquetWriter(
            self._stream, schema, compression="zstd", compression_level=zstd_level, write_statistics=True
        )
        self.rows = 0
        self.nbytes = 0  # uncompressed, as Arrow counts it

    def write_group(self, group: pa.Table) -> None:
        self._writer.write_table(group, row_group_size=max(1, group.num_rows))
        self.rows += group.num_rows
        self.nbytes += group.nbytes

    def close(self) -> ShardInfo:
        self._writer.close()
        self._stream.close()
        self.fs.move(self.temporary, self.final)
        size, digest = _size_and_digest(self.fs, self.final)
        return ShardInfo(self.relative, self.rows, size, digest)

    def abort(self) -> None:
        try:
            self._writer.close()
            self._stream.close()
        finally:
            self.fs.delete_file(self.temporary)


class TableShardWriter:
    """One unit's shards of one table, written as rows arrive: a row group each time about `row_group_bytes`
    (uncompressed) have gathered, a new shard file (`part-UNIT-SEQ`) once the open one holds `shard_bytes`.

    A unit's output is never held whole: memory is one row group plus the part being added. The same parts
    give the same files, so a retried unit's shards are byte-identical to its first attempt's."""

    def __init__(
        self,
        fs: pafs.FileSystem,
        root: str,
        table_name: str,
        schema: pa.Schema,
        unit: int,
        zstd_level: int = 3,
        shard_bytes: int = SHARD_BYTES,
        row_group_bytes: int = ROW_GROUP_BYTES,
    ):
        self.fs, self.root, self.table_name, self.schema = fs, root, table_name, schema
        self.unit, self.zstd_level, self.shard_bytes = unit, zstd_level, shard_bytes
        self._groups = RowGroups(row_group_bytes)
        self._file: ShardFileWriter | None = None
        self.shards: list[ShardInfo] = []

    def write(self, part: pa.Table) -> None:
        for group in self._groups.add(part):
            self._write_group(group)

    def close(self) -> list[ShardInfo]:
        """Write what is left; returns the shards in order (none for a table that got no rows)."""
        for group in self._groups.finish():
            self._write_group(group)
        if self._file is not None:
            self.shards.append(self._file.close())
            self._file = None
        return self.shards

    def abort(self) -> None:
        if self._file is not None:
            self._file.abort()
            self._file = None

    def _write_group(self, group: pa.Table) -> None:
        if self._file is not None and self._file.nbytes >= self.shard_bytes:
            self.shards.append(self._file.close())
            self._file = None
        if self._file is None:
            relative = f"{self.table_name}/{shard_name(self.unit, len(self.shards))}"
            self._file = ShardFileWriter(self.fs, self.root, relative, self.schema, self.zstd_level)
        self._file.write_group(group)


def write_merged_shard(
    fs: pafs.FileSystem,
    root: str,
    relative: str,
    schema: pa.Schema,
    parts: Iterable[pa.Table],
    zstd_level: int = 3,
    row_group_bytes: int = ROW_GROUP_BYTES,
) -> ShardInfo:
    """Write the concatenation of `parts` (each in `schema`) as one file at `relative`, streaming (`RowGroups`:
    memory stays at one row group plus one part whatever the file's size); the same parts give the same bytes."""
    writer = ShardFileWriter(fs, root, relative, schema, zstd_level)
    groups = RowGroups(row_group_bytes)
    try:
        for part in parts:
            for group in groups.add(part):
                writer.write_group(group)
        for group in groups.finish():
            writer.write_group(group)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


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
