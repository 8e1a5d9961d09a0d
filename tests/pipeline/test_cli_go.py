"""`tracegen trace-go` wires the Go job: programs in, go_runs / go_next_event out, summary printed."""

import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("go") is None or shutil.which("bwrap") is None,
                                reason="needs the Go toolchain and bubblewrap")


def test_trace_go_command(tmp_path):
    programs = tmp_path / "programs"
    programs.mkdir()
    shutil.copytree(ROOT / "examples" / "go" / "sequential", programs / "sequential")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(ROOT / "jobs" / "trace_go.py"), "--programs", str(programs),
                             "--runs", "2", "--timeout", "2", "--out", str(out), "--workers", "1"],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "go runs by status:" in result.stdout and "next-event rows by prefix kind" in result.stdout
    runs = pl.read_parquet(f"{out}/go_runs/*.parquet")
    assert runs["status"].to_list() == ["ok", "ok"] and runs["run_index"].to_list() == [0, 1]
    entropy = pl.read_parquet(f"{out}/go_next_event/*.parquet")["entropy"]
    assert entropy.max() == 0.0  # a sequential program has one future
