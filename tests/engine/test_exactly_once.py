"""Exactly-once at the unit level, without Ray: what a retried unit leaves on disk after an attempt died.

A task dies anywhere between its first shard and its completion record (a killed worker, a killed driver);
Ray or a re-run runs the unit again. Its output need not match the dead attempt's (a record that hit a
wall-clock budget under load may not hit it the next time): the retry must leave exactly its own shards,
because readers glob `{table}/*.parquet` (the README's polars example) as well as read the manifest.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq
import pytest

import pipeline.engine.executor as executor
import pipeline.engine.job as job
from pipeline.engine.config import KindConfig
from pipeline.engine.dataset import finished_unit
from pipeline.engine.executor import Unit, execute_unit, fingerprint
from pipeline.engine.failures import failure_row
from pipeline.engine.reader import open_root, read_manifest
from pipeline.engine.stats import StageOutput


class Died(BaseException):
    """Stands for the process dying: nothing after it runs."""


def duplicate(source: str) -> dict:
    return {"unit_id": "u", "source_id": source, "duplicate_of": "kept", "similarity": 0.9, "input_ref": "x:1"}


def produce_first(payload, unit_id, sink=None):
    return StageOutput(
        {
            "duplicates": [duplicate("a"), duplicate("b")],
            "failures": [failure_row(unit_id, "slow", "trace", "wall_time_kill", "killed at the wall clock", "x:2")],
        }
    )


def produce_second(payload, unit_id, sink=None):
    return StageOutput({"duplicates": [duplicate("a"), duplicate("b")], "failures": []})


@dataclass(frozen=True)
class PlainConfig(KindConfig):
    """A kind's config for these tests: one setting, so two values are two config hashes."""

    kind: ClassVar[str] = "test"
    size: int = 1


def run_inline(monkeypatch):
    """Units run here, one after the other, instead of as Ray tasks."""
    monkeypatch.setattr(job, "run_units", lambda units, work, **_: ([work(unit) for unit in units], {}))


def files(out: Path) -> set[str]:
    """What a reader globbing the table directories for shards sees (polars reads dot-files too)."""
    return {str(p.relative_to(out)) for p in out.glob("*/*.parquet") if p.parent.name != "_units"}


def test_a_retry_leaves_only_its_own_shards_when_the_dead_attempt_wrote_more(tmp_path, monkeypatch):
    out = tmp_path / "out"
    unit = Unit(3, "functions-00003", None)

    def die(*args, **kwargs):
        raise Died

    with monkeypatch.context() as patch:
        patch.setattr(executor, "write_unit_record", die)  # dies after its shards, before its record
        with pytest.raises(Died):
            execute_unit(unit, produce_first, str(out), "cfg", 3)
    assert "failures/part-00003-0000.parquet" in files(out)
    (out / "duplicates" / ".tmp-part-00003-0001.parquet.0123abcd").write_bytes(b"PAR1 half")  # died mid-write

    record = execute_unit(unit, produce_second, str(out), "cfg", 3)
    listed = {info.path for infos in record.shards.values() for info in infos}
    assert listed == {"duplicates/part-00003-0000.parquet"}
    assert files(out) == listed
    fs, root = open_root(str(out))
    assert finished_unit(fs, root, 3, "cfg") == record


def test_a_retry_leaves_other_units_files_alone(tmp_path):
    out = tmp_path / "out"
    first = execute_unit(Unit(0, "functions-00000", None), produce_first, str(out), "cfg", 3)
    execute_unit(Unit(1, "functions-00001", None), produce_second, str(out), "cfg", 3)
    assert {info.path for infos in first.shards.values() for info in infos} <= files(out)
    assert "failures/part-00000-0000.parquet" in files(out)


def test_a_job_over_another_input_on_the_same_output_does_not_get_the_old_rows(tmp_path, monkeypatch):
    """The unit's input fingerprint differs: it runs again, and leaves only its own shards behind."""
    run_inline(monkeypatch)
    out, config = str(tmp_path / "out"), PlainConfig()

    def produce(source, unit_id, sink=None):
        if source == "first-input":
            return StageOutput(produce_first(source, unit_id).tables | {"duplicates": [duplicate(source)]})
        return StageOutput({"duplicates": [duplicate(source)]})

    job.execute_job([Unit(0, "functions-00000", "first-input", fingerprint("first-input"))], produce, out, config)
    try:
        manifest = job.execute_job(
            [Unit(0, "functions-00000", "second-input", fingerprint("second-input"))], produce, out, config
        )
    except ValueError:
        return  # refusing the mix is as good as recomputing
    rows = [
        pq.read_table(tmp_path / "out" / s["path"]).column("source_id").to_pylist()
        for s in manifest["tables"]["duplicates"]["shards"]
    ]
    assert rows == [["second-input"]]
    assert files(tmp_path / "out") == {s["path"] for t in manifest["tables"].values() for s in t["shards"]}


class DyingFileSystem:
    """A filesystem that lists directories in lexicographic order (as S3 does) and dies right after the
    first table directory it deletes: a driver killed while `--overwrite` clears the old dataset."""

    def __init__(self, fs):
        self._fs = fs

    def __getattr__(self, name):
        return getattr(self._fs, name)

    def get_file_info(self, selector):
        infos = self._fs.get_file_info(selector)
        return sorted(infos, key=lambda info: info.path) if not isinstance(selector, (str, list)) else infos

    def delete_dir(self, path):
        self._fs.delete_dir(path)
        if not path.endswith("/_units"):  # the first table directory
            raise Died


def test_a_driver_killed_while_overwriting_never_leaves_a_manifest_pointing_at_deleted_shards(tmp_path, monkeypatch):
    run_inline(monkeypatch)
    out = str(tmp_path / "out")
    job.execute_job([Unit(0, "functions-00000", None)], produce_first, out, PlainConfig())
    real_open_root = job.open_root
    monkeypatch.setattr(job, "open_root", lambda uri: (DyingFileSystem(real_open_root(uri)[0]), real_open_root(uri)[1]))
    with pytest.raises(Died):
        job.execute_job([Unit(0, "functions-00000", None)], produce_second, out, PlainConfig(size=3), overwrite=True)
    fs, root = real_open_root(out)
    manifest = read_manifest(fs, root)
    if manifest is not None:  # a reader trusting it must find every shard it lists
        missing = [
            s["path"]
            for t in manifest["tables"].values()
            for s in t["shards"]
            if not (tmp_path / "out" / s["path"]).exists()
        ]
        assert not missing, f"the old manifest survived and lists deleted shards: {missing}"


def test_units_a_killed_run_of_another_config_left_are_refused_or_cleared(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    units = [Unit(index, f"functions-{index:05d}", None) for index in range(3)]
    for unit in units:  # a run of config A whose driver died before its manifest
        execute_unit(unit, produce_first, out, PlainConfig(size=1).hash(), 3)
    run_inline(monkeypatch)
    try:
        manifest = job.execute_job(units[:1], produce_second, out, PlainConfig(size=3))
    except ValueError:
        return  # refused, naming the leftovers: as good as clearing them
    listed = {s["path"] for t in manifest["tables"].values() for s in t["shards"]}
    assert files(tmp_path / "out") == listed


def test_two_live_attempts_of_a_unit_never_share_a_temporary_file():
    from pipeline.writers.parquet import temporary_path

    final = "/data/traces/part-00003-0000.parquet"
    names = {temporary_path(final) for _ in range(100)}
    assert len(names) == 100
    assert all(name.startswith("/data/traces/.tmp-part-00003-0000.parquet.") for name in names)
    assert not any(name.endswith(".parquet") for name in names)  # no `*.parquet` glob matches one
