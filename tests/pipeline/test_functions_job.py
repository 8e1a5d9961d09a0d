"""The function job end to end on a local Ray: shards, manifest, determinism, resume, refusals."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.dataset as ds
import pytest

from pipeline.config import JobConfig
from pipeline.functions_job import trace_functions_job
from pipeline.stages.trace_functions import TraceSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONFIG = JobConfig(chunk_size=6, trace=TraceSettings(max_seconds=1.0, record_timeout_s=3.0))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, example_records):
    """A small corpus: good records, a few hostile ones and one unreadable line."""
    chosen = [r for r in example_records if not r["id"].startswith("bad_")][:12]
    chosen += [r for r in example_records if r["id"] in ("bad_syntax", "bad_infinite_loop", "bad_raises")]
    path = tmp_path_factory.mktemp("corpus") / "functions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in chosen) + "\n{not json\n")
    return str(path)


@pytest.fixture(scope="module")
def dataset(corpus, tmp_path_factory, ray_local):
    out = str(tmp_path_factory.mktemp("run") / "out")
    return out, trace_functions_job(corpus, out, CONFIG)


def shard_bytes(out: str) -> dict[str, bytes]:
    root = Path(out)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/part-*.parquet"))}


def test_manifest_lists_every_shard_with_its_checksum(dataset):
    out, manifest = dataset
    listed = {s["path"]: s for t in manifest["tables"].values() for s in t["shards"]}
    on_disk = shard_bytes(out)
    assert set(listed) == set(on_disk)
    for path, data in on_disk.items():
        assert listed[path]["sha256"] == hashlib.sha256(data).hexdigest()
        assert listed[path]["bytes"] == len(data)
    assert manifest["tables"]["traces"]["rows"] == 14  # 15 readable records, one syntax error
    assert manifest["units"] == 3 and manifest["config_hash"] == CONFIG.hash()
    assert not list(Path(out).rglob(".tmp-*"))


def test_shard_names_are_deterministic_and_zstd(dataset):
    out, _ = dataset
    names = sorted(shard_bytes(out))
    assert "traces/part-00000-0000.parquet" in names and "traces/part-00002-0000.parquet" in names
    import pyarrow.parquet as pq
    meta = pq.ParquetFile(Path(out) / names[0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_any_reader_reads_the_shards(dataset):
    out, manifest = dataset
    traces = pl.scan_parquet(f"{out}/traces/*.parquet").select("trace_id", "exit", "events").collect()
    assert traces.height == manifest["tables"]["traces"]["rows"]
    assert ds.dataset(f"{out}/trajectories", format="parquet").count_rows() == \
        manifest["tables"]["trajectories"]["rows"] > 0
    failures = pl.read_parquet(f"{out}/failures/*.parquet")
    assert set(failures["error_type"]) == {"MalformedJSON", "SyntaxError"}


def test_a_rerun_gives_byte_identical_shards(dataset, corpus, tmp_path):
    out, manifest = dataset
    again = str(tmp_path / "again")
    trace_functions_job(corpus, again, CONFIG)
    assert shard_bytes(again) == shard_bytes(out)


def test_a_rerun_on_the_same_output_resumes_without_rewriting(dataset, corpus):
    out, manifest = dataset
    before = {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)}
    again = trace_functions_job(corpus, out, CONFIG)
    assert {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)} == before
    assert again["tables"] == manifest["tables"]


def test_an_output_from_another_config_is_refused_unless_overwritten(dataset, corpus, tmp_path):
    out = str(tmp_path / "copy")
    shutil.copytree(dataset[0], out)
    other = JobConfig(chunk_size=4, trace=CONFIG.trace)
    with pytest.raises(ValueError, match="another config"):
        trace_functions_job(corpus, out, other)
    manifest = trace_functions_job(corpus, out, other, overwrite=True)
    assert manifest["config_hash"] == other.hash() and manifest["units"] == 4
    listed = {s["path"] for t in manifest["tables"].values() for s in t["shards"]}
    assert set(shard_bytes(out)) == listed  # nothing of the old dataset is left behind


def test_an_unwritable_output_is_a_clear_error(corpus):
    with pytest.raises(ValueError, match="not writable"):
        trace_functions_job(corpus, "/proc/tracegen-out", CONFIG)


def test_the_cli_runs_the_job_and_prints_the_summary(corpus, tmp_path):
    out = tmp_path / "cli"
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", "trace-functions", "--input", corpus,
                             "--out", str(out), "--workers", "1", "--chunk-size", "20", "--max-seconds", "1",
                             "--record-timeout", "3"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for section in ("tables:", "traces by exit:", "failures by stage and reason:", "action mix:",
                    "example trace", f"{out}/traces/*.parquet"):
        assert section in result.stdout
    inspect = subprocess.run([sys.executable, "-m", "pipeline.cli", "inspect", str(out)], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
    assert inspect.returncode == 0 and "MalformedJSON" in inspect.stdout


def test_the_cli_names_a_missing_input(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", "trace-functions", "--input",
                             str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2 and "nope.jsonl" in result.stderr and "--input" in result.stderr


def test_trajectories_resample_from_stored_traces_without_retracing(dataset, tmp_path):
    from pipeline.resample_job import resample_job

    out, manifest = dataset
    same = resample_job(out, str(tmp_path / "same"), seed=CONFIG.seed, per_trace=CONFIG.per_trace)
    other = resample_job(out, str(tmp_path / "other"), seed=CONFIG.seed + 1, per_trace=1)
    original = pl.read_parquet(f"{out}/trajectories/*.parquet").sort("trajectory_id")
    again = pl.read_parquet(f"{tmp_path}/same/trajectories/*.parquet").sort("trajectory_id")
    assert original.select("trajectory_id", "text").equals(again.select("trajectory_id", "text"))
    assert same["tables"]["traces"]["rows"] == 0
    n_traces = manifest["tables"]["traces"]["rows"]
    assert other["tables"]["trajectories"]["rows"] == 2 * n_traces  # forward + inverse, one each
    fresh = set(pl.read_parquet(f"{tmp_path}/other/trajectories/*.parquet")["trajectory_id"])
    assert fresh.isdisjoint(set(original["trajectory_id"]))


def test_an_edited_input_reruns_only_the_units_whose_records_changed(dataset, corpus, tmp_path):
    out = str(tmp_path / "edited")
    shutil.copytree(dataset[0], out)
    lines = Path(corpus).read_text().splitlines()
    record = json.loads(lines[7])  # in unit 1 (chunk size 6)
    record["code"] = "def f(*args, **kwargs):\n    return 'edited'\n"
    lines[7] = json.dumps(record)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    before = {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)}
    trace_functions_job(str(edited), out, CONFIG)
    after = {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)}
    changed = {p for p in after if before.get(p) != after[p]}
    # unit 1 holds the edited record; unit 0 also changes (its failure rows name the new file); unit 2 is skipped
    assert "traces/part-00001-0000.parquet" in changed and not any("part-00002-" in p for p in changed)
    traces = pl.read_parquet(f"{out}/traces/*.parquet")
    row = traces.filter(pl.col("source_id") == record["id"]).to_dicts()[0]
    assert row["events"][-1]["arg"] == "'edited'"
