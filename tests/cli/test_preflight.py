"""Bad options and a machine that lacks something fail in one line, before Ray starts or any unit runs."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tracegen(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def test_a_bad_option_is_refused_before_any_work(tmp_path):
    done = tracegen(
        "trajectories", "--traces", str(tmp_path / "none"), "--per-trace", "0", "--out", str(tmp_path / "out")
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tracegen: error: per_trace (trajectories per trace and direction) must be a positive int, got 0"
    ]
    assert not (tmp_path / "out").exists()


def test_a_missing_sandbox_is_named_in_one_line_with_its_fix(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    done = tracegen(
        "trace-functions",
        "--input",
        str(ROOT / "examples" / "functions.jsonl"),
        "--out",
        str(tmp_path / "out"),
        PATH=str(empty),
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("tracegen: setup: sandbox 'bwrap' needs bubblewrap: install it (apt-get install bubblewrap")
    assert not (tmp_path / "out").exists()
