"""Compaction: many small unit shards merged into large deterministic files, exactly once and resumable.

The job driver runs units inline here (no Ray) and the group tasks through an inline mapper, so a failure
can be injected at each real boundary (after a group's files, after its group record, during the cleanup);
one test kills a real `tracegen compact` process with SIGKILL after its first group and runs it again.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl
import pyarrow.parquet as pq
import pytest

import pipeline.engine.job as job
from pipeline.compact import compact_dataset
from pipeline.engine.compaction import commit, estimates, group_task
from pipeline.engine.compaction import plan as plan_protocol
from pipeline.engine.compaction.group_task import write_group
from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.config import KindConfig
from pipeline.engine.dataset import INLINE_SHARDS
from pipeline.engine.executor import Unit, execute_unit, fingerprint
from pipeline.engine.failures import failure_row
from pipeline.engine.reader import open_root, read_manifest, table_rows, table_shards
from pipeline.engine.stats import StageOutput

UNITS = 40
SMALL = CompactionSettings(mode="always", target_bytes=12_000, row_group_bytes=4_000)


class Died(BaseException):
    """Stands for the process dying: nothing after it runs."""


@dataclass(frozen=True)
class PlainConfig(KindConfig):
    kind: ClassVar[str] = "test"


def produce(payload, unit_id, sink=None):
    """Rows of two tables per unit (~1 KB of zstd each); unit 7 has no failures, unit 9 no rows at all."""
    n = int(payload)
    if n == 9:
        return StageOutput({})
    duplicates = [
        {"unit_id": unit_id, "source_id": f"s{n}-{i}", "duplicate_of": noise(n, i), "similarity": 0.5, "input_ref": "x"}
        for i in range(n % 5 + 3)
    ]
    failures = [] if n == 7 else [failure_row(unit_id, f"s{n}", "trace", "Boom", "m" * 200, f"x:{n}")]
    return StageOutput({"duplicates": duplicates, "failures": failures})


def noise(*parts) -> str:
    """Text that does not compress away, so a file's size is its rows' more than its footer's."""
    return "".join(hashlib.sha256(f"{parts}{k}".encode()).hexdigest() for k in range(8))


def units(count: int = UNITS) -> list[Unit]:
    return [Unit(i, f"u-{i:05d}", str(i), fingerprint(i)) for i in range(count)]


def inline(monkeypatch):
    monkeypatch.setattr(job, "run_units", lambda units, work, **_: ([work(unit) for unit in units], {}))
    monkeypatch.setattr(commit, "_default_mapper", lambda: lambda fn, items: [fn(item) for item in items])


def run(out: Path, settings: CompactionSettings = SMALL, count: int = UNITS) -> dict:
    return job.execute_job(units(count), produce, str(out), PlainConfig(), compaction=settings)


def on_disk(out: Path) -> dict[str, bytes]:
    """Every file a reader globbing `{table}/*.parquet` sees, with its bytes."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.glob("*/*.parquet"))
        if not p.parent.name.startswith("_")
    }


def rows(out: Path) -> dict[str, list]:
    return {table: [r["source_id"] for r in table_rows(str(out), table)] for table in ("duplicates", "failures")}


def listed(out: Path) -> set[str]:
    fs, root = open_root(str(out))
    manifest = read_manifest(fs, root)
    assert manifest is not None
    return {shard["path"] for table in manifest["tables"] for shard in table_shards(fs, root, manifest, table)}


@pytest.fixture
def reference(tmp_path_factory) -> tuple[Path, dict[str, list]]:
    """The same job without compaction, and its rows."""
    out = tmp_path_factory.mktemp("plain") / "out"
    with pytest.MonkeyPatch.context() as patch:
        inline(patch)
        run(out, CompactionSettings(mode="never"))
    return out, rows(out)


def test_compaction_merges_units_into_large_files_that_hold_the_same_rows_in_the_same_order(
    tmp_path, monkeypatch, reference
):
    inline(monkeypatch)
    plain, expected = reference
    out = tmp_path / "out"
    manifest = run(out)
    assert rows(out) == expected
    assert set(on_disk(out)) == listed(out)  # the glob sees exactly the manifest's files: nothing doubled
    assert all("/compact-" in path for path in listed(out))
    assert 3 <= manifest["tables"]["duplicates"]["shard_count"] < len(on_disk(plain)) // 4
    assert manifest["compaction"]["groups"] == manifest["tables"]["duplicates"]["shard_count"]
    for path in listed(out):  # row groups of about row_group_bytes, a file of about target_bytes
        metadata = pq.ParquetFile(out / path).metadata
        assert metadata.num_row_groups >= 1 and (out / path).stat().st_size < 3 * SMALL.target_bytes
    assert pl.scan_parquet(str(out / "duplicates" / "*.parquet")).collect().height == len(expected["duplicates"])
    assert not (out / "_compaction").exists() or not any((out / "_compaction").iterdir())
    again = run(out)  # a re-run: every unit and every group is done, nothing changes
    assert rows(out) == expected and again["tables"] == manifest["tables"]


def test_two_runs_give_byte_identical_files(tmp_path, monkeypatch):
    inline(monkeypatch)
    run(tmp_path / "a")
    run(tmp_path / "b")
    assert on_disk(tmp_path / "a") == on_disk(tmp_path / "b")


@pytest.mark.parametrize("boundary", ["after_files", "after_group_record", "mid_cleanup"])
def test_a_compaction_killed_at_a_boundary_resumes_to_the_same_files(tmp_path, monkeypatch, reference, boundary):
    inline(monkeypatch)
    _, expected = reference
    run(tmp_path / "whole")
    out = tmp_path / "out"
    run(out, CompactionSettings(mode="never"))  # a finished job whose units are not compacted yet
    done, markers = [], []

    def dying_mapper():
        def mapper(fn, items):
            results = []
            for item in items:
                results.append(fn(item))
                done.append(item.group)
            return results

        return mapper

    real_write_text, real_delete = group_task.write_text, plan_protocol.delete

    def die_at_third_record(fs, path, text):
        if path.endswith(".done.json"):
            markers.append(path)
            if len(markers) == 3:
                raise Died  # the third group's files are written, its group record is not
        real_write_text(fs, path, text)

    deleted = []

    def die_deleting(fs, path):
        real_delete(fs, path)
        deleted.append(path)
        if len(deleted) == 5:
            raise Died

    def die_after_records(task):
        result = write_group(task)
        if len(done) == 1:
            raise Died
        return result

    with monkeypatch.context() as patch:
        patch.setattr(commit, "_default_mapper", dying_mapper)
        if boundary == "after_files":
            patch.setattr(group_task, "write_text", die_at_third_record)
        if boundary == "after_group_record":
            patch.setattr(commit, "write_group", die_after_records)
        if boundary == "mid_cleanup":
            patch.setattr(plan_protocol, "delete", die_deleting)
        with pytest.raises(Died):
            run(out)
    assert not rows(out) or rows(out) == expected  # the manifest committed before is still whole
    run(out)
    assert rows(out) == expected
    assert on_disk(out) == on_disk(tmp_path / "whole")
    assert set(on_disk(out)) == listed(out)


def test_a_real_kill_of_tracegen_compact_then_a_rerun_gives_the_same_files(tmp_path, monkeypatch, reference):
    inline(monkeypatch)
    plain, expected = reference
    whole, out = tmp_path / "whole", tmp_path / "out"
    shutil.copytree(plain, whole)
    shutil.copytree(plain, out)
    compact_dataset(str(whole), SMALL)
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        import pipeline.engine.compaction.commit as commit
        import pipeline.engine.orchestrate as orchestrate
        from pipeline.compact import compact_dataset
        from pipeline.engine.compaction.settings import CompactionSettings

        def killing_mapper(fn, items):
            results = [fn(items[0])]
            os.kill(os.getpid(), signal.SIGKILL)  # a real kill, right after the first group's record
            return results

        orchestrate.start_ray = lambda *a, **k: None
        commit._default_mapper = lambda: killing_mapper
        compact_dataset(sys.argv[1], CompactionSettings(mode="always", target_bytes={SMALL.target_bytes},
                        row_group_bytes={SMALL.row_group_bytes}))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    killed = subprocess.run([sys.executable, "-c", script, str(out)], env=env, capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    assert (out / "_compaction" / "plan.json").exists()
    assert rows(out) == expected  # not committed yet: the old manifest, its files all there
    compact_dataset(str(out), SMALL)
    assert on_disk(out) == on_disk(whole)
    assert rows(out) == expected and set(on_disk(out)) == listed(out)


def test_a_unit_that_runs_again_after_compaction_mends_its_group(tmp_path, monkeypatch):
    """Unit 3's input changes: it runs again, its old group is broken, the group's other units are copied by
    slice into a new group; rows are those of a job run from scratch on the new input."""
    inline(monkeypatch)
    out = tmp_path / "out"
    run(out)
    changed = units()
    changed[3] = Unit(3, "u-00003", "33", fingerprint(33))
    job.execute_job(changed, produce, str(out), PlainConfig(), compaction=SMALL)
    fresh = tmp_path / "fresh"
    job.execute_job(changed, produce, str(fresh), PlainConfig(), compaction=CompactionSettings(mode="never"))
    assert {t: sorted(r) for t, r in rows(out).items()} == {t: sorted(r) for t, r in rows(fresh).items()}
    assert "s33-0" in rows(out)["duplicates"] and "s3-0" not in rows(out)["duplicates"]
    assert set(on_disk(out)) == listed(out)


def test_units_that_all_run_again_leave_no_compacted_file_behind(tmp_path, monkeypatch):
    inline(monkeypatch)
    out = tmp_path / "out"
    run(out)
    changed = [Unit(i, f"u-{i:05d}", str(i + 100), fingerprint(i + 100)) for i in range(UNITS)]
    job.execute_job(changed, produce, str(out), PlainConfig(), compaction=CompactionSettings(mode="never"))
    assert set(on_disk(out)) == listed(out) and not any("/compact-" in path for path in listed(out))
    assert sorted(rows(out)["failures"]) == sorted(f"s{i + 100}" for i in range(UNITS) if i + 100 not in (7, 9))


def test_a_long_shard_list_goes_to_a_parquet_index_beside_a_small_manifest(tmp_path, monkeypatch):
    inline(monkeypatch)
    monkeypatch.setattr("pipeline.engine.dataset.INLINE_SHARDS", 10)
    out = tmp_path / "out"
    manifest = run(out, CompactionSettings(mode="never"), count=30)
    entry = manifest["tables"]["duplicates"]
    assert "shards" not in entry and entry["shard_count"] == 29 and entry["shard_index"]["count"] == 29
    assert len((out / "manifest.json").read_bytes()) < 8_000
    assert listed(out) == set(on_disk(out))
    assert json.loads((out / "manifest.json").read_text())["format"] == "tracegen-dataset/2"
    assert INLINE_SHARDS == 1024


def test_tracegen_compact_merges_a_dataset_and_refuses_a_versioned_root(tmp_path, reference, ray_local, capsys):
    from pipeline.cli import main

    plain, expected = reference
    copy = tmp_path / "copy"
    shutil.copytree(plain, copy)
    assert main(["compact", str(copy), "--workers", "1"]) == 0
    assert '"duplicates": 1' in capsys.readouterr().out
    assert rows(copy) == expected and set(on_disk(copy)) == listed(copy) == {
        "duplicates/compact-00000.parquet",
        "failures/compact-00000.parquet",
    }
    (tmp_path / "root" / "versions").mkdir(parents=True)
    assert main(["compact", str(tmp_path / "root")]) == 2
    assert "tracegen refresh compacts" in capsys.readouterr().err


def test_the_merge_ratio_is_learnt_from_a_bounded_sample_of_loose_shards(tmp_path, monkeypatch):
    """The driver reads loose shards up to SAMPLE_BYTES to learn the ratio, never more: shards past the budget
    are not even opened (here they are gone), and a table whose first shard alone is over it is not sampled."""
    records = [execute_unit(unit, produce, str(tmp_path), "h", 3) for unit in units(6)]
    fs, root = open_root(str(tmp_path))
    sizes = [record.shards["duplicates"][0].bytes for record in records]
    monkeypatch.setattr(estimates, "SAMPLE_BYTES", sizes[0] + sizes[1])
    for record in records[2:]:
        os.remove(tmp_path / record.shards["duplicates"][0].path)
    ratios = estimates.merge_ratios(fs, root, records, list(range(len(records))), 3)
    assert 0 < ratios["duplicates"] <= 1.0
    monkeypatch.setattr(estimates, "SAMPLE_BYTES", sizes[0] - 1)
    assert "duplicates" not in estimates.merge_ratios(fs, root, records, list(range(len(records))), 3)
