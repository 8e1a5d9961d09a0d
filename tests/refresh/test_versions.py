"""The commit log: exclusive commits under a race, readers on the highest committed N, retention that keeps
what newer manifests reference."""

import json
import multiprocessing

import pyarrow.fs as pafs
import pytest

from pipeline.engine.dataset import write_text
from pipeline.engine.reader import committed_versions, open_root, resolve_dataset, version_dir
from pipeline.engine.versions import CommitConflict, commit_version, retain, write_latest


def _try_commit(root: str, n: int, barrier) -> bool:
    fs, _ = open_root(root)
    barrier.wait()
    try:
        commit_version(fs, root, n, {"version": n, "writer": multiprocessing.current_process().name})
        return True
    except CommitConflict:
        return False


def test_racing_writers_never_both_commit_the_same_version(tmp_path):
    root = str(tmp_path)
    context = multiprocessing.get_context("fork")
    barrier = context.Manager().Barrier(8)
    with context.Pool(8) as pool:
        won = pool.starmap(_try_commit, [(root, 1, barrier)] * 8)
    assert won.count(True) == 1
    fs, _ = open_root(root)
    assert committed_versions(fs, root) == [1]
    assert [p.name for p in (tmp_path / "_log").iterdir()] == ["00000000000000000001.json"]  # no temp left


def _version(fs, root: str, n: int, shards: list[str]) -> None:
    fs.create_dir(version_dir(root, n), recursive=True)
    manifest = {"tables": {"traces": {"rows": 1, "bytes": 1, "shards": [{"path": p} for p in shards]}}}
    write_text(fs, f"{version_dir(root, n)}/manifest.json", json.dumps(manifest))
    commit_version(fs, root, n, {"version": n})


def test_readers_take_the_highest_committed_version_not_a_staging_one(tmp_path):
    fs, root = open_root(str(tmp_path))
    _version(fs, root, 1, ["traces/a.parquet"])
    _version(fs, root, 2, ["traces/a.parquet"])
    fs.create_dir(version_dir(root, 3))  # a refresh building version 3, not committed
    write_text(fs, f"{version_dir(root, 3)}/manifest.json", "{}")
    assert resolve_dataset(root) == f"{root}/versions/2"
    assert resolve_dataset(f"{root}/versions/1") == f"{root}/versions/1"


def test_retention_keeps_the_last_k_and_every_referenced_version(tmp_path):
    fs, root = open_root(str(tmp_path))
    _version(fs, root, 1, ["traces/a.parquet"])
    _version(fs, root, 2, ["traces/b.parquet"])  # supersedes 1 entirely
    _version(fs, root, 3, ["../2/traces/b.parquet", "traces/c.parquet"])
    _version(fs, root, 4, ["../2/traces/b.parquet", "../3/traces/c.parquet", "traces/d.parquet"])
    write_latest(fs, root, 4)
    assert retain(fs, root, 1) == [1]
    assert committed_versions(fs, root) == [2, 3, 4]
    assert fs.get_file_info(version_dir(root, 1)).type == pafs.FileType.NotFound
    with pytest.raises(ValueError, match="keep must be"):
        retain(fs, root, 0)
