"""The persisted plan (steps 1 and 3 of the protocol, see the package): the groups written to `_compaction/`
before any group task runs, a pending plan resumed or (when the units changed since) abandoned, and the
cleanup after the commit that deletes what no committed record lists, then the plan."""

import json
import posixpath
from collections.abc import Iterator, Sequence

import pyarrow.fs as pafs

from pipeline.engine.compaction.estimates import merge_ratios
from pipeline.engine.compaction.files import DIRECTORY, PLAN, compacted_path, delete, done_path, group_plan_path
from pipeline.engine.compaction.group_task import member_slices
from pipeline.engine.compaction.groups import classify, next_group, plan_groups
from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.dataset import UnitRecord, write_text
from pipeline.engine.executor import fingerprint
from pipeline.engine.reader import read_text
from schemas import TABLES

PLAN_FORMAT = "tracegen-compaction/1"


def record_digest(record: UnitRecord) -> str:
    return fingerprint(record.to_json())


def load_plan(fs: pafs.FileSystem, root: str) -> dict | None:
    text = read_text(fs, f"{root}/{PLAN}")
    return None if text is None else json.loads(text)


def _group_plans(fs: pafs.FileSystem, root: str, plan: dict) -> Iterator[tuple[int, dict | None]]:
    """Each group's plan, one at a time (None where its file is gone)."""
    for group in plan["groups"]:
        text = read_text(fs, f"{root}/{group_plan_path(group)}")
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
            paths |= {compacted_path(table, group) for table in TABLES}
        for path in sorted(posixpath.normpath(p) for p in paths):
            if not path.startswith("..") and path not in listed:
                delete(fs, f"{root}/{path}")
        delete(fs, f"{root}/{done_path(group)}")
        delete(fs, f"{root}/{group_plan_path(group)}")
    delete(fs, f"{root}/{PLAN}")


def write_plan(
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
        write_text(fs, f"{root}/{group_plan_path(group)}", text)
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


def pending_members(fs: pafs.FileSystem, root: str, plan: dict, records: Sequence[UnitRecord]):
    """{group: member positions} of a pending plan, or None when it no longer fits `records` (a group plan
    is gone, or a member is neither as planned nor as its group made it: the units changed since)."""
    members: dict[int, list[int]] = {}
    for group, group_plan in _group_plans(fs, root, plan):
        if group_plan is None:
            return None
        text = read_text(fs, f"{root}/{done_path(group)}")
        slices = member_slices(json.loads(text)) if text is not None else None
        for index, (position, digest) in enumerate(group_plan["members"]):
            if position >= len(records):
                return None
            now = records[position]
            if record_digest(now) != digest and (slices is None or now.shards != slices[index]):
                return None
        members[group] = [position for position, _ in group_plan["members"]]
    return members


def finish_pending(fs: pafs.FileSystem, root: str, records: Sequence[UnitRecord]) -> None:
    """A committed dataset (a published version) whose compaction was killed before its cleanup: delete the
    merged sources that `records` (what its manifest lists) no longer list."""
    plan = load_plan(fs, root)
    if plan is not None:
        finish_plan(fs, root, plan, records)
