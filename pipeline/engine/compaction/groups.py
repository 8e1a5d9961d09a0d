"""Which units a compaction takes (loose units, survivors of broken groups) and how they fall into groups."""

import posixpath
from collections.abc import Sequence

from pipeline.engine.compaction.estimates import estimated_bytes
from pipeline.engine.compaction.files import group_of
from pipeline.engine.dataset import UnitRecord


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


def plan_groups(
    records: Sequence[UnitRecord], positions: list[int], target_bytes: int, ratios: dict[str, float] | None = None
) -> list[list[int]]:
    """Consecutive runs of `positions`: a group closes before a member would take any table past the target
    (a member larger than the target is a group of its own). Deterministic: sizes are the shards' own
    (times `ratios`, see `merge_ratios`)."""
    groups: list[list[int]] = []
    sizes: dict[str, float] = {}
    for position in positions:
        member = estimated_bytes(records[position], ratios or {})
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
