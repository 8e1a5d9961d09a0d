"""Compaction: finished units' small shards merged into large files, exactly once and resumable.

A unit stays small (a cheap retry), so a large dataset is millions of small shards; compaction merges whole
units, in order, into *groups*: a group is a run of consecutive units (of the candidates, see below) that
closes before any table's file would pass `target_bytes`, and it writes one file per table,
`{table}/compact-{group:05d}.parquet`, with row groups of about `row_group_bytes` uncompressed. A unit's
rows of every table are in the same group (pack and rederive-go read a unit's tables together), and each
unit's completion record then lists, per table, its *slice* of the group's file (ShardInfo offset, rows,
file_rows). The manifest lists each file once (pipeline/engine/dataset.py).

Candidates, in the order of the records given (unit order; a refresh's planned order):
- loose units (their own shards), when the settings want them compacted (`CompactionSettings.wanted`);
- survivors: the units of a *broken* group, one some of whose rows no listed unit claims any more (a unit
  that re-ran, a refresh's dropped unit). A broken group's files cannot be listed, so its survivors are
  always compacted again, read by slice from the old files.

The protocol (a crash anywhere re-runs to the same files, nothing lost or doubled):
1. plan: the groups, their members and sources, written to `_compaction/` (group plans, then `plan.json`
   last: the pending marker). A pending plan is resumed as it is, never re-planned.
2. one Ray task per group writes its files (temp name, then rename; the same sources give the same bytes),
   then its group record `_compaction/{group:05d}.done.json`, then (jobs) its members' new completion
   records; a task whose group record exists skips the writing.
3. the caller writes the manifest from the new records (the commit point), then calls `finish`:
   `plan.json` turns to phase "cleanup", the sources no committed record lists any more (inside the
   dataset directory only: a refresh never deletes an earlier version's files) are deleted, then the plan.
"""

import json
import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine.dataset import UnitRecord, open_root, read_text, write_text, write_unit_record
from pipeline.engine.executor import fingerprint
from pipeline.writers.parquet import ROW_GROUP_BYTES, ShardInfo, write_merged_shard
from schemas import TABLES, schema_of

DIRECTORY = "_compaction"
PLAN = f"{DIRECTORY}/plan.json"
PLAN_FORMAT = "tracegen-compaction/1"
MODES = ("auto", "always", "never")
_COMPACTED = re.compile(r"^compact-(\d+)\.parquet$")

Mapper = Callable[[Callable, Sequence], list]
T = TypeVar("T")


@dataclass(frozen=True)
class CompactionSettings:
    """When and how large: `auto` compacts the loose units once some table has `min_shards` loose shards or
    `target_bytes` of them; `always` compacts any loose unit; `never` none (broken groups are mended in
    every mode). `row_group_bytes` 0: each table's own (96 MiB; a table may set ROW_GROUP_BYTES)."""

    mode: str = "auto"
    target_bytes: int = 512 << 20
    row_group_bytes: int = 0
    min_shards: int = 256

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"--compact must be one of {', '.join(MODES)}, got {self.mode!r}")
        for name in ("target_bytes", "min_shards"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"compaction {name} must be an int >= 1, got {getattr(self, name)!r}")
        if type(self.row_group_bytes) is not int or self.row_group_bytes < 0:
            raise ValueError(f"compaction row_group_bytes must be an int >= 0, got {self.row_group_bytes!r}")

    def wanted(self, loose: list[UnitRecord]) -> bool:
        if not loose or self.mode == "never":
            return False
        if self.mode == "always":
            return True
        for table in TABLES:
            infos = [info for record in loose for info in record.shards.get(table, [])]
            if len(infos) >= self.min_shards or sum(info.bytes for info in infos) >= self.target_bytes:
                return True
        return False

    def row_group_for(self, table: str) -> int:
        return self.row_group_bytes or getattr(TABLES[table], "ROW_GROUP_BYTES", ROW_GROUP_BYTES)

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "target_bytes": self.target_bytes,
            "row_group_bytes": self.row_group_bytes,
            "min_shards": self.min_shards,
        }


def group_of(path: str) -> tuple[str, int] | None:
    """(directory, group) of a compacted file's path (`X/{table}/compact-G.parquet` -> (X, G)), else None."""
    directory, name = posixpath.split(posixpath.normpath(path))
    match = _COMPACTED.match(name)
    return None if match is None else (posixpath.dirname(directory), int(match.group(1)))


def record_digest(record: UnitRecord) -> str:
    return fingerprint(record.to_json())


def classify(records: Sequence[UnitRecord]) -> tuple[list[int], list[int]]:
    """(loose, survivors): positions of the units with shards of their own, and of those in broken groups."""
    claimed: dict[str, list[int]] = {}  # file -> [rows the listed slices claim, its rows]
    for record in records:
        for infos in record.shards.values():
            for info in infos:
                if info.is_slice:
                    counts = claimed.setdefault(posixpath.normpath(info.path), [0, info.file_rows or 0])
                    counts[0] += info.rows
    broken = {group_of(path) for path, (rows, total) in claimed.items() if rows != total}
    loose, survivors = [], []
    for position, record in enumerate(records):
        infos = [info for infos in record.shards.values() for info in infos]
        if any(not info.is_slice for info in infos):
            loose.append(position)
        elif any(group_of(info.path) in broken for info in infos):
            survivors.append(position)
    return loose, survivors


SAMPLE_SHARDS = 64  # loose shards per table merged on the driver to learn how much smaller they get merged ...
SAMPLE_BYTES = 16 << 20  # ... up to about this many bytes of them (the driver holds them decoded)


def merge_ratios(
    fs: pafs.FileSystem, root: str, records: Sequence[UnitRecord], positions: list[int], zstd_level: int
) -> dict[str, float]:
    """Per table, the size of a merged file over the size of the loose shards it is made of, measured on the
    first loose shards of the candidates, at most SAMPLE_SHARDS of them and SAMPLE_BYTES (written in memory, as
    a group task writes them): a small shard is mostly its footer, so merged files are several times smaller than
    their sources' sum. A table whose first shard is larger than SAMPLE_BYTES is not sampled (ratio 1: such a
    shard is mostly data). Deterministic: the same shards give the same ratios."""
    ratios = {}
    for table in TABLES:
        sample, held = [], 0
        for info in (info for p in positions for info in records[p].shards.get(table, []) if not info.is_slice):
            if len(sample) == SAMPLE_SHARDS or held + info.bytes > SAMPLE_BYTES:
                break
            sample.append(info)
            held += info.bytes
        if not sample:
            continue
        parts = []
        for info in sample:
            with fs.open_input_file(posixpath.normpath(f"{root}/{info.path}")) as handle:
                parts.append(pq.ParquetFile(handle).read())
        sink = pa.BufferOutputStream()
        pq.write_table(pa.concat_tables(parts), sink, compression="zstd", compression_level=zstd_level)
        ratios[table] = min(1.0, sink.getvalue().size / max(1, sum(info.bytes for info in sample)))
    return ratios


def _estimated_bytes(record: UnitRecord, ratios: dict[str, float]) -> dict[str, float]:
    """A unit's bytes per table once merged: its shards' times the table's merge ratio, or its share of the
    compacted files it has slices of."""
    return {
        table: sum(_share(info, ratios.get(table, 1.0)) for info in infos) for table, infos in record.shards.items()
    }


def _share(info: ShardInfo, ratio: float) -> float:
    return info.bytes * info.rows / max(1, info.file_rows or 0) if info.is_slice else info.bytes * ratio


def plan_groups(
    records: Sequence[UnitRecord], positions: list[int], target_bytes: int, ratios: dict[str, float] | None = None
) -> list[list[int]]:
    """Consecutive runs of `positions`: a group closes before a member would take any table past the target
    (a member larger than the target is a group of its own). Deterministic: sizes are the shards' own
    (times `ratios`, see `merge_ratios`)."""
    groups: list[list[int]] = []
    sizes: dict[str, float] = {}
    for position in positions:
        member = _estimated_bytes(records[position], ratios or {})
        if groups and groups[-1] and any(sizes.get(t, 0) + b > target_bytes for t, b in member.items()):
            groups.append([])
            sizes = {}
        if not groups:
            groups.append([])
        groups[-1].append(position)
        for table, size in member.items():
            sizes[table] = sizes.get(table, 0) + size
    return groups


def next_group(records: Sequence[UnitRecord]) -> int:
    """1 + the highest group number this directory's listed slices use (0 for none): a new group never
    takes the name of a file some record still reads."""
    own = [
        found[1]
        for record in records
        for infos in record.shards.values()
        for info in infos
        if info.is_slice and not posixpath.normpath(info.path).startswith("..")
        if (found := group_of(info.path)) is not None
    ]
    return max(own, default=-1) + 1


@dataclass(frozen=True)
class GroupTask:
    """A group task's payload: where and which group; the task reads its members and their sources from the
    group's plan file (so the driver never holds more than one group's plan)."""

    root: str
    group: int
    plan_id: str
    zstd_level: int
    row_group_bytes: dict[str, int]


def _group_plan_path(group: int) -> str:
    return f"{DIRECTORY}/{group:05d}.plan.json"


def _done_path(group: int) -> str:
    return f"{DIRECTORY}/{group:05d}.done.json"


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
        path = posixpath.normpath(f"{self.root}/{info['path']}")
        if "offset" not in info:
            with self.fs.open_input_file(path) as handle:
                return pq.ParquetFile(handle).read()  # a third cheaper than read_table on small files
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
    group_plan = json.loads(read_text(fs, f"{root}/{_group_plan_path(task.group)}") or "null")
    if group_plan is None:
        raise ValueError(f"{root}/{_group_plan_path(task.group)} is missing: the compaction's plan was removed")
    text = read_text(fs, f"{root}/{_done_path(task.group)}")
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

            relative = f"{table}/compact-{task.group:05d}.parquet"
            written = write_merged_shard(
                fs, root, relative, schema, parts(), task.zstd_level, task.row_group_bytes[table]
            )
            if written.rows != sum(counts):
                raise ValueError(f"{root}/{relative}: wrote {written.rows} rows, the plan says {sum(counts)}")
            files[table], rows[table] = written.as_dict(), counts
        done = {"group": task.group, "plan_id": task.plan_id, "files": files, "rows": rows}
        write_text(fs, f"{root}/{_done_path(task.group)}", json.dumps(done, sort_keys=True))
    slices = member_slices(done)
    for index, text in enumerate(group_plan.get("records", [])):  # a job's: its units' new completion records
        write_unit_record(fs, root, replace(UnitRecord.from_json(text), shards=slices[index]))
    return done


@dataclass
class Compaction:
    """What `compact` did: the records to commit (slices in place of merged shards) and the plan to finish."""

    records: list[UnitRecord]
    plan: dict | None = None
    fs: pafs.FileSystem | None = None
    root: str = ""

    def manifest_extra(self, settings: "CompactionSettings") -> dict:
        """What the manifest records of compaction: the settings, and how many groups its files come from."""
        groups = {
            found
            for record in self.records
            for infos in record.shards.values()
            for info in infos
            if info.is_slice and (found := group_of(info.path)) is not None
        }
        return {"compaction": {**settings.as_dict(), "groups": len(groups)}} if groups else {}

    def finish(self) -> None:
        """After the manifest (the commit point) lists `records`: delete what no record lists, then the plan."""
        if self.plan is not None and self.fs is not None:
            finish_plan(self.fs, self.root, self.plan, self.records)


def _load_plan(fs: pafs.FileSystem, root: str) -> dict | None:
    text = read_text(fs, f"{root}/{PLAN}")
    return None if text is None else json.loads(text)


def _group_plans(fs: pafs.FileSystem, root: str, plan: dict) -> Iterator[tuple[int, dict | None]]:
    """Each group's plan, one at a time (None where its file is gone)."""
    for group in plan["groups"]:
        text = read_text(fs, f"{root}/{_group_plan_path(group)}")
        yield group, None if text is None else json.loads(text)


def finish_plan(fs: pafs.FileSystem, root: str, plan: dict, records: Sequence[UnitRecord], outputs=False) -> None:
    """Delete the plan's sources (and, abandoning it, its outputs) that lie in this directory and that no
    record in `records` lists, then the plan itself (`plan.json` last, so a kill here resumes the cleanup)."""
    if plan.get("phase") != "cleanup":
        plan = dict(plan, phase="cleanup")
        write_text(fs, f"{root}/{PLAN}", json.dumps(plan, sort_keys=True))
    listed = {posixpath.normpath(info.path) for r in records for infos in r.shards.values() for info in infos}
    for group, group_plan in _group_plans(fs, root, plan):
        if group_plan is None:  # cleaned already
            continue
        paths = {info["path"] for sources in group_plan["sources"] for infos in sources.values() for info in infos}
        if outputs:
            paths |= {f"{table}/compact-{group:05d}.parquet" for table in TABLES}
        for path in sorted(posixpath.normpath(p) for p in paths):
            if not path.startswith("..") and path not in listed:
                _delete(fs, f"{root}/{path}")
        _delete(fs, f"{root}/{_done_path(group)}")
        _delete(fs, f"{root}/{_group_plan_path(group)}")
    _delete(fs, f"{root}/{PLAN}")


def _delete(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def _write_plan(
    fs: pafs.FileSystem,
    root: str,
    records: Sequence[UnitRecord],
    settings: CompactionSettings,
    zstd_level: int,
    persist_records: bool,
) -> tuple[dict | None, dict[int, list[int]]]:
    """Plan a compaction over `records` and write it (group plans, then `plan.json`); (plan, {group:
    member positions}), or (None, {}) when nothing is to be compacted. One group's plan in memory at a time."""
    loose, survivors = classify(records)
    if not settings.wanted([records[p] for p in loose]):
        loose = []
    positions = sorted(loose + survivors)
    if not positions:
        return None, {}
    first = next_group(records)
    fs.create_dir(f"{root}/{DIRECTORY}", recursive=True)
    members: dict[int, list[int]] = {}
    digests = []
    ratios = merge_ratios(fs, root, records, positions, zstd_level)
    for index, group_members in enumerate(plan_groups(records, positions, settings.target_bytes, ratios)):
        group = first + index
        group_plan = {
            "group": group,
            "members": [[p, record_digest(records[p])] for p in group_members],
            "sources": [
                {table: [info.as_dict() for info in infos] for table, infos in sorted(records[p].shards.items())}
                for p in group_members
            ],
        }
        if persist_records:
            group_plan["records"] = [records[p].to_json() for p in group_members]
        text = json.dumps(group_plan, sort_keys=True)
        write_text(fs, f"{root}/{_group_plan_path(group)}", text)
        members[group] = group_members
        digests.append(fingerprint(text))
    plan = {
        "format": PLAN_FORMAT,
        "phase": "groups",
        "groups": sorted(members),
        "zstd_level": zstd_level,
        "row_group_bytes": {table: settings.row_group_for(table) for table in TABLES},
    }
    plan["id"] = fingerprint(plan, digests)
    write_text(fs, f"{root}/{PLAN}", json.dumps(plan, sort_keys=True))
    return plan, members


def _pending_members(fs: pafs.FileSystem, root: str, plan: dict, records: Sequence[UnitRecord]):
    """{group: member positions} of a pending plan, or None when it no longer fits `records` (a group plan
    is gone, or a member is neither as planned nor as its group made it: the units changed since)."""
    members: dict[int, list[int]] = {}
    for group, group_plan in _group_plans(fs, root, plan):
        if group_plan is None:
            return None
        text = read_text(fs, f"{root}/{_done_path(group)}")
        slices = member_slices(json.loads(text)) if text is not None else None
        for index, (position, digest) in enumerate(group_plan["members"]):
            if position >= len(records):
                return None
            now = records[position]
            if record_digest(now) != digest and (slices is None or now.shards != slices[index]):
                return None
        members[group] = [position for position, _ in group_plan["members"]]
    return members


def compact(
    fs: pafs.FileSystem,
    root: str,
    records: Sequence[UnitRecord],
    settings: CompactionSettings,
    zstd_level: int,
    *,
    uri: str,
    persist_records: bool,
    mapper: Mapper | None = None,
) -> Compaction:
    """Resume a pending compaction of the dataset at `root` (`uri` for the tasks) or plan one over `records`;
    returns the records to commit. `persist_records`: rewrite the members' completion records in `_units/`
    (a job's; a refresh keeps its units in the manifest). `mapper(fn, items)` runs the group tasks (Ray)."""
    records = list(records)
    plan = _load_plan(fs, root)
    if plan is not None and plan.get("phase") == "cleanup":
        finish_plan(fs, root, plan, records)
        plan = None
    members = _pending_members(fs, root, plan, records) if plan is not None else None
    if plan is not None and members is None:
        finish_plan(fs, root, plan, records, outputs=True)  # stale (the units changed since): abandon it
        plan = None
    if plan is None or members is None:
        plan, members = _write_plan(fs, root, records, settings, zstd_level, persist_records)
        if plan is None:
            return Compaction(records)
    tasks = [GroupTask(uri, group, plan["id"], plan["zstd_level"], plan["row_group_bytes"]) for group in plan["groups"]]
    mapper = mapper or _default_mapper()
    for task, done in zip(tasks, mapper(write_group, tasks), strict=True):
        slices = member_slices(done)
        for index, position in enumerate(members[task.group]):
            records[position] = replace(records[position], shards=slices[index])
    return Compaction(records, plan, fs, root)


def compact_and_commit(
    fs: pafs.FileSystem,
    root: str,
    records: Sequence[UnitRecord],
    settings: CompactionSettings,
    zstd_level: int,
    publish: Callable[[list[UnitRecord], dict], T],
    *,
    uri: str,
    persist_records: bool,
    mapper: Mapper | None = None,
) -> tuple[T, list[UnitRecord]]:
    """The commit sequence every writer of a dataset follows (a job, `tracegen compact`, a refresh's version):
    compact `records`' shards (`compact`), `publish(records, manifest_extra)` with the records as they now are —
    the manifest, the commit point — then finish the compaction (delete the shards it merged). A crash before
    `publish` leaves the old commit whole; after it, the next run finishes the cleanup. Returns what `publish`
    returned and the committed records."""
    compacted = compact(
        fs, root, records, settings, zstd_level, uri=uri, persist_records=persist_records, mapper=mapper
    )
    published = publish(compacted.records, compacted.manifest_extra(settings))
    compacted.finish()
    return published, compacted.records


def _default_mapper() -> Mapper:
    """One Ray task per group (retried by Ray when a worker dies)."""
    from pipeline.engine.orchestrate import map_tasks

    return map_tasks


def sweep_unlisted(fs: pafs.FileSystem, root: str, records: Sequence[UnitRecord]) -> list[str]:
    """Delete the compacted files of this directory that no record lists: a group all of whose units ran
    again (their input changed) has no survivors, so no plan names its files. Lists the table directories
    (a job calls it only when its dataset had compacted files). Returns the deleted paths."""
    listed = {posixpath.normpath(info.path) for r in records for infos in r.shards.values() for info in infos}
    deleted = []
    for table in TABLES:
        infos = fs.get_file_info(pafs.FileSelector(f"{root}/{table}", allow_not_found=True))
        for info in infos:
            if _COMPACTED.match(info.base_name) and f"{table}/{info.base_name}" not in listed:
                _delete(fs, info.path)
                deleted.append(f"{table}/{info.base_name}")
    return deleted


def finish_pending(fs: pafs.FileSystem, root: str, records: Sequence[UnitRecord]) -> None:
    """A committed dataset (a published version) whose compaction was killed before its cleanup: delete the
    merged sources that `records` (what its manifest lists) no longer list."""
    plan = _load_plan(fs, root)
    if plan is not None:
        finish_plan(fs, root, plan, records)
