"""The function-tracing kind end to end on a local Ray: shards, manifest, determinism, resume, refusals,
dedup before tracing."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pipeline.engine.job import run_job
from pipeline.kinds import functions as functions_kind
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind, find_duplicates
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.dedup import DedupSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# A function, the same with its names changed (a near-duplicate), and another function.
ORIGINAL = (
    "def f(xs):\n    total = 0\n    for x in xs:\n        if x % 2:\n            total += x * x\n    return total\n"
)
RENAMED = (
    "def f(values):\n    acc = 0\n    for v in values:\n        if v % 2:\n            acc += v * v\n    return acc\n"
)
DISTINCT = "def f(xs):\n    seen = set()\n    return [x for x in xs if not (x in seen or seen.add(x))]\n"


def shard_bytes(out: str) -> dict[str, bytes]:
    root = Path(out)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("*/part-*.parquet"))}


def test_manifest_lists_every_shard_with_its_checksum(dataset, functions_config):
    out, manifest = dataset
    listed = {s["path"]: s for t in manifest["tables"].values() for s in t["shards"]}
    on_disk = shard_bytes(out)
    assert set(listed) == set(on_disk)
    for path, data in on_disk.items():
        assert listed[path]["sha256"] == hashlib.sha256(data).hexdigest()
        assert listed[path]["bytes"] == len(data)
    assert manifest["tables"]["traces"]["rows"] == 14  # 15 readable records, one syntax error
    assert manifest["units"] == 3 and manifest["config_hash"] == functions_config.hash()
    assert manifest["kind"] == "functions" and manifest["config"] == functions_config.as_dict()
    assert not list(Path(out).rglob(".tmp-*"))


def test_shard_names_are_deterministic_and_zstd(dataset):
    out, _ = dataset
    names = sorted(shard_bytes(out))
    assert "traces/part-00000-0000.parquet" in names and "traces/part-00002-0000.parquet" in names
    meta = pq.ParquetFile(Path(out) / names[0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_any_reader_reads_the_shards(dataset):
    out, manifest = dataset
    traces = pl.scan_parquet(f"{out}/traces/*.parquet").select("trace_id", "exit", "events").collect()
    assert traces.height == manifest["tables"]["traces"]["rows"]
    assert (
        ds.dataset(f"{out}/trajectories", format="parquet").count_rows()
        == manifest["tables"]["trajectories"]["rows"]
        > 0
    )
    failures = pl.read_parquet(f"{out}/failures/*.parquet")
    assert set(failures["error_type"]) == {"MalformedJSON", "SyntaxError"}


def test_a_rerun_gives_byte_identical_shards(dataset, corpus, functions_config, tmp_path):
    out, manifest = dataset
    again = str(tmp_path / "again")
    run_job(FunctionsKind(), corpus, functions_config, again)
    assert shard_bytes(again) == shard_bytes(out)


def test_a_rerun_on_the_same_output_resumes_without_rewriting(dataset, corpus, functions_config):
    out, manifest = dataset
    before = {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)}
    again = run_job(FunctionsKind(), corpus, functions_config, out)
    assert {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)} == before
    assert again["tables"] == manifest["tables"]


def test_an_output_from_another_config_is_refused_unless_overwritten(dataset, corpus, functions_config, tmp_path):
    out = str(tmp_path / "copy")
    shutil.copytree(dataset[0], out)
    other = FunctionsConfig(chunk_size=4, trace=functions_config.trace)
    with pytest.raises(ValueError, match="another config"):
        run_job(FunctionsKind(), corpus, other, out)
    manifest = run_job(FunctionsKind(), corpus, other, out, overwrite=True)
    assert manifest["config_hash"] == other.hash() and manifest["units"] == 4
    listed = {s["path"] for t in manifest["tables"].values() for s in t["shards"]}
    assert set(shard_bytes(out)) == listed  # nothing of the old dataset is left behind


def test_an_unwritable_output_is_a_clear_error(corpus, functions_config, ray_local):
    with pytest.raises(ValueError, match="not writable"):
        run_job(FunctionsKind(), corpus, functions_config, "/proc/tracegen-out")


def test_an_edited_input_reruns_only_the_units_whose_records_changed(dataset, corpus, functions_config, tmp_path):
    out = str(tmp_path / "edited")
    shutil.copytree(dataset[0], out)
    lines = Path(corpus).read_text().splitlines()
    record = json.loads(lines[7])  # in unit 1 (chunk size 6)
    record["code"] = "def f(*args, **kwargs):\n    return 'edited'\n"
    lines[7] = json.dumps(record)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    before = {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)}
    run_job(FunctionsKind(), str(edited), functions_config, out)
    after = {p: os.stat(Path(out) / p).st_mtime_ns for p in shard_bytes(out)}
    changed = {p for p in after if before.get(p) != after[p]}
    # unit 1 holds the edited record; unit 0 also changes (its failure rows name the new file); unit 2 is skipped
    assert "traces/part-00001-0000.parquet" in changed and not any("part-00002-" in p for p in changed)
    traces = pl.read_parquet(f"{out}/traces/*.parquet")
    row = traces.filter(pl.col("source_id") == record["id"]).to_dicts()[0]
    assert row["events"][-1]["arg"] == "'edited'"


def test_the_job_drops_duplicates_before_tracing_and_records_them(tmp_path, ray_local):
    lines = [
        {"id": "orig", "code": ORIGINAL, "input": "[1, 2, 3]"},
        {"id": "renamed", "code": RENAMED, "input": "[1, 2, 3]"},
        {"id": "distinct", "code": DISTINCT, "input": "[1, 2, 3]"},
    ]
    path = tmp_path / "dups.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    manifest = run_job(FunctionsKind(), str(path), FunctionsConfig(), str(tmp_path / "out"))
    traces = pl.read_parquet(f"{tmp_path}/out/traces/*.parquet")
    assert sorted(traces["source_id"]) == ["distinct", "orig"]
    dups = pl.read_parquet(f"{tmp_path}/out/duplicates/*.parquet").to_dicts()
    assert [(d["source_id"], d["duplicate_of"]) for d in dups] == [("renamed", "orig")]
    assert manifest["stats"]["dedup"]["dropped"] == {"near_duplicate": 1}
    assert manifest["stats"]["trace"]["in"] == 2  # the duplicate cost no tracing


def test_many_small_tasks_or_one_big_task_keep_the_same_records(example_records, ray_local, monkeypatch):
    records = [FunctionRecord(r["id"], r["code"], r["input"], r.get("entry", "f"), "x") for r in example_records]
    records = [
        FunctionRecord("r998", ORIGINAL, "[1, 2, 3]", "f", "mem:998"),
        *records,
        FunctionRecord("r999", RENAMED.replace("values", "items"), "[1, 2, 3]", "f", "mem:999"),
    ]
    monkeypatch.setattr(functions_kind, "DEDUP_BATCH", 7)
    kept_many, rows_many, _ = find_duplicates(records, DedupSettings())
    monkeypatch.setattr(functions_kind, "DEDUP_BATCH", 10_000)
    kept_one, rows_one, _ = find_duplicates(records, DedupSettings())
    assert rows_many == rows_one and [r["source_id"] for r in rows_one] == ["r999"]
    assert [r.id for r in kept_many] == [r.id for r in kept_one]


def test_a_record_with_a_lone_surrogate_id_costs_the_file_nothing(tmp_path):
    """Its line is a read failure; the other bad line's failure and the good records still reach unit 0."""
    good = json.dumps({"id": "ok", "code": "def f():\n    return 1\n", "input": ""})
    path = tmp_path / "ids.jsonl"
    path.write_text("\n".join([good, json.dumps({"id": "\udcff", "code": "def f(): pass", "input": ""}), "{"]) + "\n")
    units = FunctionsKind().units(str(path), FunctionsConfig())
    assert [record.id for record in units[0].payload.records] == ["ok"] and units[0].fingerprint
    failures = units[0].payload.read_failures
    assert [(row["error_type"], row["input_ref"]) for row in failures] == [
        ("BadField", f"{path}:2"),
        ("MalformedJSON", f"{path}:3"),
    ]
