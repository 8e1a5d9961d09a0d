"""`tracegen trace-functions` and `tracegen inspect`, in process: the job runs, the summary is printed, and a
missing input is named before any unit runs."""

import json
import shutil

import pytest

from pipeline.cli import main

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture
def corpus(tmp_path, example_records) -> str:
    """A few good records, one that does not compile and one unreadable line."""
    chosen = [r for r in example_records if not r["id"].startswith("bad_")][:4]
    chosen += [r for r in example_records if r["id"] == "bad_syntax"]
    path = tmp_path / "functions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in chosen) + "\n{not json\n")
    return str(path)


def test_the_cli_runs_the_job_and_prints_the_summary(corpus, tmp_path, capsys, ray_local):
    out = tmp_path / "cli"
    status = main(
        [
            "trace-functions",
            "--input",
            corpus,
            "--out",
            str(out),
            "--workers",
            "1",
            "--chunk-size",
            "20",
            "--max-seconds",
            "1",
            "--record-timeout",
            "3",
        ]
    )
    printed = capsys.readouterr()
    assert status == 0, printed.err
    for section in (
        "tables:",
        "traces by exit:",
        "failures by stage and reason:",
        "action mix:",
        "example trace",
        f"{out}/traces/*.parquet",
    ):
        assert section in printed.out
    assert main(["inspect", str(out)]) == 0
    assert "MalformedJSON" in capsys.readouterr().out


def test_the_cli_names_a_missing_input(tmp_path, capsys, ray_local):
    path = tmp_path / "nope.jsonl"
    assert main(["trace-functions", "--input", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracegen: error: ")
    assert f"cannot read function records from '{path}'" in err and "--input" in err
    assert not (tmp_path / "o" / "manifest.json").exists()
