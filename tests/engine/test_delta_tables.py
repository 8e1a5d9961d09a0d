"""Each table of a versioned root as a Delta table: Delta version N reads exactly version N's files, a missed
Delta commit is repaired, retention goes through the log, and a copied root still reads."""

import json
import multiprocessing
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pipeline.engine.dataset import write_text
from pipeline.engine.delta_tables import DELTA_LOG, sync_logs
from pipeline.engine.reader import open_root, version_dir
from pipeline.engine.versions import commit_version, retain, write_latest
from schemas import TABLES, schema_of

VERSIONS = {  # version -> failures files its manifest lists (path relative to the version, rows)
    1: [("failures/part-a.parquet", 3)],
    2: [("../1/failures/part-a.parquet", 3), ("failures/part-b.parquet", 2)],
    3: [("../2/failures/part-b.parquet", 2), ("failures/compact-00000.parquet", 4)],  # a's rows dropped
}


def _publish(fs, root: str, n: int) -> None:
    """Version n by hand: its own files, its manifest, its commit (what a refresh's publish does)."""
    directory = version_dir(root, n)
    shards = []
    for path, rows in VERSIONS[n]:
        if not path.startswith(".."):
            os.makedirs(os.path.dirname(f"{directory}/{path}"), exist_ok=True)
            values = [f"{n}-{path}-{i}" for i in range(rows)]
            pq.write_table(pa.table({f.name: values for f in schema_of("failures")}), f"{directory}/{path}")
        shards.append({"path": path, "rows": rows, "bytes": 1, "sha256": ""})
    tables = {t: {"rows": 0, "bytes": 0, "shards": []} for t in TABLES}
    tables["failures"] = {"rows": sum(r for _, r in VERSIONS[n]), "bytes": 1, "shards": shards}
    write_text(fs, f"{directory}/manifest.json", json.dumps({"format": "tracegen-dataset/2", "tables": tables}))
    commit_version(fs, root, n, {"version": n, "created": f"2026-12-0{n}T00:00:00+00:00"})
    write_latest(fs, root, n)


def _rows(root: str, table: str, version: int) -> int:
    return DeltaTable(f"{root}/{table}", version=version).to_pyarrow_table().num_rows


def test_delta_version_n_reads_exactly_the_files_of_version_n(tmp_path):
    fs, root = open_root(str(tmp_path))
    for n in VERSIONS:
        _publish(fs, root, n)
        sync_logs(fs, root)
    assert [_rows(root, "failures", n) for n in range(4)] == [0, 3, 5, 6]
    for n in VERSIONS:
        files = {os.path.realpath(uri) for uri in DeltaTable(f"{root}/failures", version=n).file_uris()}
        assert files == {os.path.realpath(f"{version_dir(root, n)}/{path}") for path, _ in VERSIONS[n]}
    for table in TABLES:  # every table, with or without rows, has one Delta version per dataset version
        assert DeltaTable(f"{root}/{table}").version() == 3
        assert DeltaTable(f"{root}/{table}").schema().to_arrow().names == schema_of(table).names
    assert os.readlink(f"{root}/failures/1") == "../versions/1/failures"  # relative: the root can move


def test_a_crash_between_the_commit_and_the_delta_log_is_repaired_by_the_next_sync(tmp_path):
    fs, root = open_root(str(tmp_path))
    _publish(fs, root, 1)
    sync_logs(fs, root)
    _publish(fs, root, 2)  # killed before its Delta commits
    _publish(fs, root, 3)
    sync_logs(fs, root)
    assert [_rows(root, "failures", n) for n in range(4)] == [0, 3, 5, 6]
    log = tmp_path / "failures" / DELTA_LOG
    before = {p.name: p.read_bytes() for p in log.iterdir()}
    sync_logs(fs, root)  # nothing to do: no new Delta version, the same bytes
    assert {p.name: p.read_bytes() for p in log.iterdir()} == before
    assert sorted(before) == [f"{n:020d}.json" for n in range(4)]  # no temporary file left


def _sync(root: str, barrier) -> None:
    fs, _ = open_root(root)
    barrier.wait()
    sync_logs(fs, root)


def test_racing_syncs_write_each_delta_version_once_and_the_same(tmp_path):
    fs, root = open_root(str(tmp_path))
    for n in VERSIONS:
        _publish(fs, root, n)
    context = multiprocessing.get_context("spawn")  # deltalake's runtime and fork do not mix
    barrier = context.Manager().Barrier(4)
    with context.Pool(4) as pool:
        pool.starmap(_sync, [(root, barrier)] * 4)
    assert [_rows(root, "failures", n) for n in range(4)] == [0, 3, 5, 6]
    assert sorted(os.listdir(f"{root}/failures/{DELTA_LOG}")) == [f"{n:020d}.json" for n in range(4)]


def test_retention_removes_files_only_once_the_latest_delta_version_lists_none(tmp_path):
    fs, root = open_root(str(tmp_path))
    for n in VERSIONS:
        _publish(fs, root, n)
    sync_logs(fs, root)
    assert retain(fs, root, 1) == [1]  # version 3 still reads version 2's file b
    assert not os.path.lexists(f"{root}/failures/1") and os.path.islink(f"{root}/failures/2")
    assert _rows(root, "failures", 3) == 6
    with pytest.raises(OSError):  # as after Delta's VACUUM: a removed version's Delta version cannot be read
        _rows(root, "failures", 1)


def test_a_copied_root_reads_the_same_versions(tmp_path):
    fs, root = open_root(str(tmp_path / "root"))
    for n in VERSIONS:
        _publish(fs, root, n)
    sync_logs(fs, root)
    shutil.copytree(tmp_path / "root", tmp_path / "copy", symlinks=True)
    shutil.rmtree(tmp_path / "root")
    assert [_rows(str(tmp_path / "copy"), "failures", n) for n in range(4)] == [0, 3, 5, 6]
