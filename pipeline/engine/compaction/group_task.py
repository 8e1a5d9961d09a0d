"""The Ray task that writes one compaction group: its files, its group record, its members' new records."""

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine.compaction.files import compacted_path, done_path, group_plan_path
from pipeline.engine.dataset import UnitRecord, write_text, write_unit_record
from pipeline.engine.reader import open_root, read_shard, read_text, shard_file
from pipeline.writers.parquet import ShardInfo, write_merged_shard
from schemas import TABLES, schema_of


@dataclass(frozen=True)
class GroupTask:
    """A group task's payload: where and which group; the task reads its members and their sources from the
    group's plan file (so the driver never holds more than one group's plan)."""

    root: str
    group: int
    plan_id: str
    zstd_level: int
    row_group_bytes: dict[str, int]


class _RowSource:
    """Rows of files read in increasing offsets: each row group is decoded once, not once per slice."""

    def __init__(self, fs: pafs.FileSystem, root: str):
        self.fs, self.root = fs, root
        self.path: str | None = None
        self.file: pq.ParquetFile | None = None
        self.group_start = self.group_end = 0
        self.group_index = -1
        self.table: pa.Table | None = None

    def read(self, info: dict) -> pa.Table:
        if "offset" not in info:
            return read_shard(self.fs, self.root, info["path"])
        path = shard_file(self.root, info["path"])
        if path != self.path:
            self.path = path
            self.file = pq.ParquetFile(self.fs.open_input_file(path))
            self.group_index, self.group_start, self.group_end = -1, 0, 0
        assert self.file is not None
        start, stop = info["offset"], info["offset"] + info["rows"]
        pieces = []
        while start < stop:
            while not self.group_start <= start < self.group_end:
                if start < self.group_start:  # not in increasing order: start over
                    self.group_index, self.group_start, self.group_end = -1, 0, 0
                self.group_index += 1
                self.group_start = self.group_end
                self.group_end += self.file.metadata.row_group(self.group_index).num_rows
                self.table = None
            table = self.table = self.table or self.file.read_row_group(self.group_index)
            end = min(stop, self.group_end)
            pieces.append(table.slice(start - self.group_start, end - start))
            start = end
        return pa.concat_tables(pieces)


def member_slices(done: dict) -> list[dict[str, list[ShardInfo]]]:
    """Each member's shards once its group is written (from the group record): its slice of each of the
    group's files, found from the members' row counts in member order."""
    members: list[dict[str, list[ShardInfo]]] = []
    for table, info in sorted(done["files"].items()):
        file, offset = ShardInfo(**info), 0
        for index, count in enumerate(done["rows"][table]):
            if index == len(members):
                members.append({})
            if count:
                members[index][table] = [replace(file, rows=count, offset=offset, file_rows=file.rows)]
            offset += count
    return members


def write_group(task: GroupTask) -> dict:
    """One group: its files (skipped when its group record is there), its group record, its members' records."""
    fs, root = open_root(task.root)
    group_plan = json.loads(read_text(fs, f"{root}/{group_plan_path(task.group)}") or "null")
    if group_plan is None:
        raise ValueError(f"{root}/{group_plan_path(task.group)} is missing: the compaction's plan was removed")
    text = read_text(fs, f"{root}/{done_path(task.group)}")
    done = json.loads(text) if text is not None else None
    if done is None or done.get("plan_id") != task.plan_id:
        source = _RowSource(fs, root)
        files, rows = {}, {}
        for table in TABLES:
            counts = [sum(info["rows"] for info in sources.get(table, [])) for sources in group_plan["sources"]]
            if not any(counts):
                continue
            schema = schema_of(table)

            def parts(table: str = table, schema: pa.Schema = schema) -> Iterator[pa.Table]:
                for sources in group_plan["sources"]:
                    for info in sources.get(table, []):
                        part = source.read(info)
                        yield part if part.schema == schema else part.select(schema.names).cast(schema)

            relative = compacted_path(table, task.group)
            written = write_merged_shard(
                fs, root, relative, schema, parts(), task.zstd_level, task.row_group_bytes[table]
            )
            if written.rows != sum(counts):
                raise ValueError(f"{root}/{relative}: wrote {written.rows} rows, the plan says {sum(counts)}")
            files[table], rows[table] = written.as_dict(), counts
        done = {"group": task.group, "plan_id": task.plan_id, "files": files, "rows": rows}
        write_text(fs, f"{root}/{done_path(task.group)}", json.dumps(done, sort_keys=True))
    slices = member_slices(done)
    for index, text in enumerate(group_plan.get("records", [])):  # a job's: its units' new completion records
        write_unit_record(fs, root, replace(UnitRecord.from_json(text), shards=slices[index]))
    return done
