"""--decontaminate end to end on a local Ray: in trace-functions, planted near-copies of benchmark items are dropped
before tracing, each a `contaminated` row naming the item, the file and its sha256, a record whose traced call
returns an item's output for its input is dropped after tracing (the io rule), unrelated records are traced and
the manifest records the benchmark set; in pack, the trajectories of such copies are left out."""

import argparse
import shutil

import pytest
from decontam_fixtures import ITEMS, PLANTED, PLANTED_ITEM, SAME_IO, TRACED_IO, unrelated_functions, write_jsonl

from pipeline.engine.job import run_job
from pipeline.engine.reader import table_rows
from pipeline.inspect import load_table, summarize
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.kinds.repos import ReposKind
from pipeline.refresh.command import add_refresh_arguments, configs_from
from pipeline.stages.decontaminate import Decontaminator
from pipeline.stages.trace_functions import TraceSettings
from pipeline.version_report import plots

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
TRACE = TraceSettings(max_seconds=1.0, record_timeout_s=3.0)
KEPT = unrelated_functions(4)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[str, str]:
    """(the benchmark file, a functions file: unrelated records with the planted copies among them)."""
    root = tmp_path_factory.mktemp("decontaminate")
    benchmark = write_jsonl(root / "bench.jsonl", ITEMS)
    return benchmark, write_jsonl(root / "functions.jsonl", KEPT[:2] + PLANTED + [SAME_IO, TRACED_IO] + KEPT[2:])


def test_planted_copies_are_dropped_and_recorded(files, tmp_path, ray_local):
    benchmark, corpus = files
    kept = KEPT
    decontaminator = Decontaminator.from_files([benchmark])
    config = FunctionsConfig(chunk_size=4, trace=TRACE, decontaminate=decontaminator)
    out = str(tmp_path / "out")
    manifest = run_job(FunctionsKind(), corpus, config, out)

    traces = load_table(out, "traces")
    assert traces is not None and sorted(traces["source_id"]) == sorted(r["id"] for r in kept)
    contaminated = load_table(out, "contaminated")
    assert contaminated is not None
    rows = {row["dropped_id"]: row for row in contaminated.to_dicts()}
    traced = rows.pop(next(k for k, row in rows.items() if row["source_id"] == TRACED_IO["id"]))
    assert (traced["table"], traced["item_id"], traced["rule"], traced["score"]) == ("traces", "bench_1", "io", 1.0)
    assert {k: row["item_id"] for k, row in rows.items()} == {**PLANTED_ITEM, SAME_IO["id"]: "bench_1"}
    sha256 = decontaminator.benchmarks[0].sha256
    for row in rows.values():
        assert (row["table"], row["benchmark"], row["benchmark_sha256"]) == ("function_records", benchmark, sha256)
        assert row["unit_id"] == "functions-00000" and row["source_id"] == row["dropped_id"]
    assert rows[SAME_IO["id"]]["rule"] == "io" and {rows[r["id"]]["rule"] for r in PLANTED} == {"minhash"}
    trajectories = load_table(out, "trajectories")
    assert trajectories is not None and TRACED_IO["id"] not in set(trajectories["source_id"])

    assert manifest["config"]["decontaminate"]["benchmarks"] == [{"path": benchmark, "sha256": sha256}]
    assert manifest["stats"]["decontaminate"]["dropped"] == {"contaminated_io": 1, "contaminated_minhash": 3}
    assert manifest["stats"]["decontaminate_traces"]["dropped"] == {"contaminated_io": 1}
    report = summarize(out)
    assert "contaminated: 5 dropped, against 1 benchmark file(s):" in report
    assert f"  {benchmark} (sha256 {sha256[:12]}): 5  io 2, minhash 3" in report
    drawn = {plot.name: plot.bars for plot in plots(out, manifest, [])}
    assert drawn["contaminated.png"] == [(f"bench.jsonl ({sha256[:8]})", 5)]


def test_pack_leaves_out_the_trajectories_of_copies(files, tmp_path, ray_local):
    """A dataset traced without decontamination, packed with it: the planted copies' trajectories are not in any
    sample, each is a `contaminated` row (table trajectories) naming the item its trace's code matched."""
    benchmark, corpus = files
    traced = str(tmp_path / "traced")
    run_job(FunctionsKind(), corpus, FunctionsConfig(chunk_size=4, trace=TRACE), traced)
    source_of = {row["trajectory_id"]: row["source_id"] for row in table_rows(traced, "trajectories")}
    packed = str(tmp_path / "packed")
    manifest = run_job(PackKind(), traced, PackConfig(decontaminate=Decontaminator.from_files([benchmark])), packed)

    in_samples = {doc_id for row in table_rows(packed, "packed") for doc_id in row["doc_ids"]}
    assert PLANTED_ITEM.keys() <= set(source_of.values())
    assert {source_of[doc_id] for doc_id in in_samples} == set(source_of.values()) - PLANTED_ITEM.keys()
    rows = list(table_rows(packed, "contaminated"))
    assert {row["dropped_id"] for row in rows} == {t for t, source in source_of.items() if source in PLANTED_ITEM}
    assert all(row["item_id"] == PLANTED_ITEM[row["source_id"]] and row["table"] == "trajectories" for row in rows)
    assert manifest["stats"]["decontaminate"]["dropped"] == {"contaminated_minhash": len(rows)}


def test_the_option_of_each_command_reads_the_benchmark_files_into_its_config(files):
    """trace-functions, trace-repos and pack take --decontaminate FILE... and --decontaminate-threshold; refresh
    gives its functions and repos kinds the same decontaminator."""
    benchmark, _ = files
    options = ["--decontaminate", benchmark, "--decontaminate-threshold", "0.9"]
    for kind, source in ((FunctionsKind(), "--input"), (ReposKind(), "--manifest"), (PackKind(), "--data")):
        parser = argparse.ArgumentParser()
        kind.add_arguments(parser)
        _, config = kind.configure(parser.parse_args([source, "x", *options]))
        decontaminate = config.decontaminate
        assert [b.path for b in decontaminate.benchmarks] == [benchmark] and decontaminate.threshold == 0.9
        assert len(decontaminate.index.items) == len(ITEMS)
    parser = argparse.ArgumentParser()
    add_refresh_arguments(parser)
    configs = configs_from(parser.parse_args(["--sources", "s", "--root", "r", *options]))
    assert configs.functions.decontaminate is configs.repos.decontaminate
    assert configs.functions.decontaminate.benchmarks[0].path == benchmark
