"""`tracegen trace-repos` on the bundled example repository (real git repo, real sandbox, real pytest), and a
missing manifest named before any unit runs."""

import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from pipeline.cli import main

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_trace_repos_command_on_the_bundled_example(tmp_path, capsys, ray_local):
    built = subprocess.run(
        [str(ROOT / "examples" / "repos" / "build.sh"), str(tmp_path / "repos")],
        capture_output=True,
        text=True,
        check=True,
    )
    manifest = built.stdout.strip()
    out = tmp_path / "out"
    status = main(
        [
            "trace-repos",
            "--manifest",
            manifest,
            "--out",
            str(out),
            "--workers",
            "1",
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    printed = capsys.readouterr()
    assert status == 0, printed.err[-2000:]
    assert "traces by exit:" in printed.out
    traces = pl.read_parquet(f"{out}/traces/*.parquet")
    assert set(traces["source_kind"]) == {"repo"} and traces["commit"].n_unique() == 1
    calls = {(row["qualname"], row["input"]) for row in traces.select("qualname", "input").to_dicts()}
    assert ("wrap", "text='the quick brown fox', width=10") in calls
    assert ("wrap", "text='x', width=0") in calls  # the raising call is a trace with exit error
    assert pl.read_parquet(f"{out}/trajectories/*.parquet").height > 0


def test_a_missing_manifest_is_named(tmp_path, capsys, ray_local):
    path = tmp_path / "nope.toml"
    status = main(
        ["trace-repos", "--manifest", str(path), "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "cache")]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("tracegen: error: ") and f"cannot read the repository manifest '{path}'" in err
    assert not (tmp_path / "o" / "manifest.json").exists()
