"""The driver's side of a compaction: resume the pending plan or write one, run one group task per group,
and the one commit sequence every writer of a dataset follows (`compact_and_commit`)."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import pyarrow.fs as pafs

from pipeline.engine.compaction.files import group_of
from pipeline.engine.compaction.group_task import GroupTask, member_slices, write_group
from pipeline.engine.compaction.plan import finish_plan, load_plan, pending_members, write_plan
from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.dataset import UnitRecord
from pipeline.engine.delta_tables import sync_logs_of_version

Mapper = Callable[[Callable, Sequence], list]
T = TypeVar("T")


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
    plan = load_plan(fs, root)
    if plan is not None and plan.get("phase") == "cleanup":
        finish_plan(fs, root, plan, records)
        plan = None
    members = pending_members(fs, root, plan, records) if plan is not None else None
    if plan is not None and members is None:
        finish_plan(fs, root, plan, records, outputs=True)  # stale (the units changed since): abandon it
        plan = None
    if plan is None or members is None:
        plan, members = write_plan(fs, root, records, settings, zstd_level, persist_records)
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
    the manifest, the commit point — then (a refresh's version) its tables' Delta commits, then finish the
    compaction (delete the shards it merged). A crash before `publish` leaves the old commit whole; after it,
    the next run finishes the cleanup and the Delta logs. Returns what `publish` returned and the committed
    records."""
    compacted = compact(
        fs, root, records, settings, zstd_level, uri=uri, persist_records=persist_records, mapper=mapper
    )
    published = publish(compacted.records, compacted.manifest_extra(settings))
    sync_logs_of_version(fs, root)  # a refresh's version: its tables' Delta commits follow the manifest's
    compacted.finish()
    return published, compacted.records


def _default_mapper() -> Mapper:
    """One Ray task per group (retried by Ray when a worker dies)."""
    from pipeline.engine.orchestrate import map_tasks

    return map_tasks
