"""Where a compaction's files lie in a dataset directory: the compacted files `{table}/compact-{group}.parquet`
and the plan's files under `_compaction/`; deleting them, and sweeping compacted files no record lists."""

import posixpath
import re
from collections.abc import Sequence

import pyarrow.fs as pafs

from pipeline.engine.dataset import UnitRecord
from schemas import TABLES

DIRECTORY = "_compaction"
PLAN = f"{DIRECTORY}/plan.json"
_COMPACTED = re.compile(r"^compact-(\d+)\.parquet$")


def group_of(path: str) -> tuple[str, int] | None:
    """(directory, group) of a compacted file's path (`X/{table}/compact-G.parquet` -> (X, G)), else None."""
    directory, name = posixpath.split(posixpath.normpath(path))
    match = _COMPACTED.match(name)
    return None if match is None else (posixpath.dirname(directory), int(match.group(1)))


def compacted_path(table: str, group: int) -> str:
    """A group's file of `table`, relative to the dataset directory."""
    return f"{table}/compact-{group:05d}.parquet"


def group_plan_path(group: int) -> str:
    return f"{DIRECTORY}/{group:05d}.plan.json"


def done_path(group: int) -> str:
    return f"{DIRECTORY}/{group:05d}.done.json"


def delete(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


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
                delete(fs, info.path)
                deleted.append(f"{table}/{info.base_name}")
    return deleted
