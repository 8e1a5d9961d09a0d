"""`tracegen trace-go` wires the Go job: programs in, go_runs / go_next_event out, summary printed."""

import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.cli import main

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None or shutil.which("bwrap") is None, reason="needs the Go toolchain and bubblewrap"
)


def test_trace_go_command(tmp_path, capsys, ray_local):
    programs = tmp_path / "programs"
    programs.mkdir()
    shutil.copytree(ROOT / "examples" / "go" / "sequential", programs / "sequential")
    out = tmp_path / "out"
    status = main(
        ["trace-go", "--programs", str(programs), "--runs", "2", "--timeout", "2", "--out", str(out), "--workers", "1"]
        + ["--go-window", "4", "--go-stride", "2"]
    )
    printed = capsys.readouterr()
    assert status == 0, printed.err[-2000:]
    assert "go runs by status:" in printed.out and "next-event rows by prefix kind" in printed.out
    runs = pl.read_parquet(f"{out}/go_runs/*.parquet")
    assert runs["status"].to_list() == ["ok", "ok"] and runs["run_index"].to_list() == [0, 1]
    entropy = pl.read_parquet(f"{out}/go_next_event/*.parquet")["entropy"]
    assert entropy.max() == 0.0  # a sequential program has one future
    windows = pl.read_parquet(f"{out}/go_trajectories/*.parquet")  # two identical runs: each window once
    assert windows["depth"].to_list() == list(range(0, 2 * windows.height, 2)) and windows["n_steps"].max() == 4
    assert windows["runs"].to_list() == [[0, 1]] * windows.height and windows["ends"].to_list()[-1]


def test_a_bad_gomaxprocs_list_is_named(tmp_path, capsys):
    assert main(["trace-go", "--programs", str(tmp_path), "--gomaxprocs", "1,x", "--out", str(tmp_path / "o")]) == 2
    assert "--gomaxprocs '1,x' is not a comma list of integers" in capsys.readouterr().err
