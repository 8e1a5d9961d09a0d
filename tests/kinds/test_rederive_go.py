"""`rederive-go`: a Go dataset's events re-derived from its stored raw traces equal the traced ones when the
harness and the cap are unchanged, and a lower cap truncates runs without re-running a program."""

import shutil

import polars as pl
import pytest
from go_helpers import EXAMPLES, requires_bwrap, requires_go

from pipeline.cli import main
from pipeline.engine.job import run_job
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.stages.go.runs import GoSettings

pytestmark = [requires_go, requires_bwrap]


@pytest.fixture(scope="module")
def go_dataset(tmp_path_factory, ray_local) -> str:
    programs = tmp_path_factory.mktemp("programs")
    for name in ("sequential", "leaked_select", "compile_error"):
        shutil.copytree(EXAMPLES / name, programs / name)
    out = str(tmp_path_factory.mktemp("go") / "out")
    run_job(GoKind(), str(programs), GoConfig(go=GoSettings(runs=3, timeout_s=2.0)), out, workers=2)
    return out


def table(out, name: str, *keys: str) -> pl.DataFrame:
    return pl.read_parquet(f"{out}/{name}/*.parquet").sort(list(keys))


def test_rederived_runs_and_distributions_equal_the_traced_ones(go_dataset, tmp_path, capsys):
    out = str(tmp_path / "again")
    assert main(["rederive-go", "--data", go_dataset, "--out", out, "--workers", "2"]) == 0
    assert "go runs by status:" in capsys.readouterr().out
    assert table(out, "go_runs", "program_id", "run_index").equals(
        table(go_dataset, "go_runs", "program_id", "run_index")
    )
    keys = ("program_id", "prefix_kind", "depth", "prefix_hash")
    assert table(out, "go_next_event", *keys).equals(table(go_dataset, "go_next_event", *keys))
    keys = ("program_id", "depth", "window_hash", "n_steps")
    assert table(out, "go_trajectories", *keys).equals(table(go_dataset, "go_trajectories", *keys))
    assert table(out, "go_traces", "program_id", "run_index").equals(
        table(go_dataset, "go_traces", "program_id", "run_index")
    )


def test_a_lower_cap_truncates_the_rederived_runs(go_dataset, tmp_path):
    out = str(tmp_path / "capped")
    assert main(["rederive-go", "--data", go_dataset, "--out", out, "--max-events", "2", "--workers", "2"]) == 0
    runs = table(out, "go_runs", "program_id", "run_index").filter(pl.col("run_index") >= 0)
    assert runs["n_events"].max() == 2
    assert runs.filter(pl.col("program_id") == "leaked_select")["truncated"].all()


def test_a_dataset_that_is_not_go_is_refused(tmp_path, capsys):
    assert main(["rederive-go", "--data", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "holds no Go dataset" in capsys.readouterr().err
