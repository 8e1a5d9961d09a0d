"""`tracegen trace-repos` on the bundled example repository: real git repo, real sandbox, real pytest."""

import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_trace_repos_command_on_the_bundled_example(tmp_path):
    built = subprocess.run([str(ROOT / "examples" / "repos" / "build.sh"), str(tmp_path / "repos")],
                           capture_output=True, text=True, check=True)
    manifest = built.stdout.strip()
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(ROOT / "jobs" / "trace_repos.py"), "--manifest", manifest,
                             "--out", str(out), "--workers", "1", "--cache-dir", str(tmp_path / "cache")],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    traces = pl.read_parquet(f"{out}/traces/*.parquet")
    assert set(traces["source_kind"]) == {"repo"} and traces["commit"].n_unique() == 1
    calls = {(row["qualname"], row["input"]) for row in traces.select("qualname", "input").to_dicts()}
    assert ("wrap", "text='the quick brown fox', width=10") in calls
    assert ("wrap", "text='x', width=0") in calls  # the raising call is a trace with exit error
    assert pl.read_parquet(f"{out}/trajectories/*.parquet").height > 0
