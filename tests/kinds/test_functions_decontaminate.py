"""trace-functions --decontaminate end to end on a local Ray: planted near-copies of benchmark items are dropped
before tracing, each a `contaminated` row naming the item, the file and its sha256; unrelated records are traced;
the manifest records the benchmark set."""

import shutil

import pytest
from decontam_fixtures import ITEMS, PLANTED, PLANTED_ITEM, SAME_IO, unrelated_functions, write_jsonl

from pipeline.engine.job import run_job
from pipeline.inspect import load_table, summarize
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.stages.decontaminate import Decontaminator
from pipeline.stages.trace_functions import TraceSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_planted_copies_are_dropped_and_recorded(tmp_path, ray_local):
    benchmark = write_jsonl(tmp_path / "bench.jsonl", ITEMS)
    kept = unrelated_functions(4)
    corpus = write_jsonl(tmp_path / "functions.jsonl", kept[:2] + PLANTED + [SAME_IO] + kept[2:])
    decontaminator = Decontaminator.from_files([benchmark])
    config = FunctionsConfig(
        chunk_size=4, trace=TraceSettings(max_seconds=1.0, record_timeout_s=3.0), decontaminate=decontaminator
    )
    out = str(tmp_path / "out")
    manifest = run_job(FunctionsKind(), corpus, config, out)

    traces = load_table(out, "traces")
    assert traces is not None and sorted(traces["source_id"]) == sorted(r["id"] for r in kept)
    contaminated = load_table(out, "contaminated")
    assert contaminated is not None
    rows = {row["dropped_id"]: row for row in contaminated.to_dicts()}
    assert {k: row["item_id"] for k, row in rows.items()} == {**PLANTED_ITEM, SAME_IO["id"]: "sample_1"}
    sha256 = decontaminator.benchmarks[0].sha256
    for row in rows.values():
        assert (row["table"], row["benchmark"], row["benchmark_sha256"]) == ("function_records", benchmark, sha256)
        assert row["unit_id"] == "functions-00000" and row["source_id"] == row["dropped_id"]
    assert rows[SAME_IO["id"]]["rule"] == "io" and {rows[r["id"]]["rule"] for r in PLANTED} == {"minhash"}

    assert manifest["config"]["decontaminate"]["benchmarks"] == [{"path": benchmark, "sha256": sha256}]
    assert manifest["stats"]["decontaminate"]["dropped"] == {"contaminated_io": 1, "contaminated_minhash": 3}
    report = summarize(out)
    assert "contaminated: 4 dropped, against 1 benchmark file(s):" in report
    assert f"  {benchmark} (sha256 {sha256[:12]}): 4  io 1, minhash 3" in report
