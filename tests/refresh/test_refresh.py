"""`tracegen refresh` over three simulated nights, a refresh killed mid-run, and two refreshes at once.

Sources are real: git repositories made with `git init` and real commits (repo_fixtures.py), a JSONL
functions file, a directory of Go programs copied from examples/go. Units run in the `process` sandbox:
the sandbox is not what these tests are about.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import repo_fixtures as fixtures
from go_helpers import EXAMPLES as GO_EXAMPLES
from go_helpers import requires_go

from pipeline.engine.reader import table_rows
from pipeline.kinds.functions import FunctionsConfig
from pipeline.kinds.go import GoConfig
from pipeline.kinds.repos import ReposConfig
from pipeline.refresh.plan import RefreshConfigs
from pipeline.refresh.sequence import refresh
from pipeline.stages.go.runs import GoSettings

ROOT = Path(__file__).resolve().parents[2]
LIB = {
    "lib/__init__.py": "",
    "lib/code.py": "def double(x):\n    return x * 2\n",
    "tests/test_lib.py": "from lib.code import double\n\ndef test_double():\n    assert double(2) == 4\n",
}


def configs(tmp_path) -> RefreshConfigs:
    return RefreshConfigs(
        functions=FunctionsConfig(sandbox="process", chunk_size=4),
        repos=ReposConfig(sandbox="process", cache_dir=str(tmp_path / "cache")),
        go=GoConfig(sandbox="process", go=GoSettings(runs=2)),
    )


def records(n: int, start: int = 0) -> list[dict]:
    return [
        {"id": f"r{i}", "code": f"def f(x):\n    y = x + {i}\n    return y * {i + 1}\n", "input": str(i)}
        for i in range(start, start + n)
    ]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def ids(root: str) -> dict[str, set]:
    return {
        "traces": {row["trace_id"] for row in table_rows(root, "traces")},
        "trajectories": {row["trajectory_id"] for row in table_rows(root, "trajectories")},
        "failures": {(row["source_id"], row["stage"], row["error_type"]) for row in table_rows(root, "failures")},
        "go_runs": {(row["program_id"], row["run_index"]) for row in table_rows(root, "go_runs")},
    }


def log(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "_log").glob("*.json"))]


@requires_go
def test_three_nights(tmp_path, ray_local):
    origins, go_dir, functions = tmp_path / "origins", tmp_path / "go", tmp_path / "functions.jsonl"
    fixtures.make_repo(origins / "alpha", LIB)
    fixtures.make_repo(origins / "beta", LIB)
    for name in ("sequential", "pingpong_unbuffered"):
        shutil.copytree(GO_EXAMPLES / name, go_dir / name)
    write_jsonl(functions, records(6))
    sources = tmp_path / "sources.toml"
    sources.write_text(
        "".join(f'[[repo]]\nname = "{n}"\nurl = "{origins / n}"\nref = "main"\n\n' for n in ("alpha", "beta"))
        + f'[[functions]]\npath = "{functions}"\n\n[[go]]\npath = "{go_dir}"\n'
    )
    root = tmp_path / "root"
    night1 = refresh(str(sources), str(root), configs(tmp_path))
    assert (night1.version, night1.units_run, night1.failed) == (1, 6, {})  # 2 repos, 2 chunks, 2 programs

    night2 = refresh(str(sources), str(root), configs(tmp_path))
    assert (night2.version, night2.latest, night2.units_run, night2.units_reused) == (None, 1, 0, 6)
    assert "nothing new" in night2.summary()

    fixtures.commit(origins / "alpha", {"lib/code.py": "def double(x):\n    return x + x\n"}, "later")
    shutil.rmtree(origins / "beta")
    write_jsonl(functions, records(5)[1:] + records(2, start=10))  # r0 and r5 removed, r10 r11 added
    shutil.copytree(GO_EXAMPLES / "fan_in", go_dir / "fan_in")
    night3 = refresh(str(sources), str(root), configs(tmp_path))
    # run: alpha@new, beta (unresolved: a failure row), r1-r4 r10 r11 in two chunks (both published chunks
    # lost a record), fan_in; reused: the two unchanged programs; dropped: alpha@old, beta@old, both chunks
    assert night3.version == 2 and night3.failed == {}
    assert (night3.units_run, night3.units_reused, night3.units_dropped) == (5, 2, 4)
    assert [entry["version"] for entry in log(root)] == [1, 2]

    scratch = refresh(str(sources), str(tmp_path / "scratch"), configs(tmp_path), report=False)
    assert scratch.version == 1
    incremental, fresh = ids(str(root)), ids(str(tmp_path / "scratch"))
    assert incremental == fresh
    assert {row["source_id"] for row in table_rows(str(root), "traces") if row["source_kind"] == "function"} == {
        "r1",
        "r2",
        "r3",
        "r4",
        "r10",
        "r11",
    }
    traces = list(table_rows(str(root), "traces"))
    assert len(traces) == len({row["trace_id"] for row in traces})  # no duplicates
    assert any(source == "beta" or "beta" in str(source) for source, stage, _ in incremental["failures"])
    assert {program for program, _ in incremental["go_runs"]} == {"sequential", "pingpong_unbuffered", "fan_in"}
    shards = json.loads((root / "versions" / "2" / "manifest.json").read_text())["tables"]["go_runs"]["shards"]
    assert any(s["path"].startswith("../1/") for s in shards)  # referenced, not copied


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "refresh", *args, "--sandbox", "process", "--workers", "1"]


def functions_sources(tmp_path: Path, n: int) -> Path:
    write_jsonl(tmp_path / "f.jsonl", records(n))
    (tmp_path / "sources.toml").write_text('[[functions]]\npath = "f.jsonl"\n')
    return tmp_path / "sources.toml"


def test_two_refreshes_at_once_publish_each_version_once(tmp_path):
    sources = functions_sources(tmp_path, 4)
    root = tmp_path / "root"
    started = [
        subprocess.Popen(
            cli("--sources", str(sources), "--root", str(root)), cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=240)[0] for process in started]
    assert [process.returncode for process in started] == [0, 0]
    assert sorted("published version 1" in out for out in outputs) == [False, True]
    assert any("nothing new" in out for out in outputs)
    assert [entry["version"] for entry in log(root)] == [1]


def test_a_killed_refresh_leaves_the_latest_version_readable_and_the_next_run_reuses_its_units(tmp_path):
    sources = functions_sources(tmp_path, 4)
    root = tmp_path / "root"
    subprocess.run(
        cli("--sources", str(sources), "--root", str(root), "--no-report"), cwd=ROOT, check=True, timeout=240
    )
    before = ids(str(root))
    write_jsonl(tmp_path / "f.jsonl", records(4) + records(120, start=100))  # 8 new chunks of 16
    process = subprocess.Popen(
        cli("--sources", str(sources), "--root", str(root), "--no-report"), cwd=ROOT, start_new_session=True
    )
    units = root / "versions" / "2" / "_units"
    deadline = time.monotonic() + 180
    while not (units.exists() and any(units.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in units.glob("*.json")}
    assert finished, "the refresh was killed before any unit finished"
    assert [entry["version"] for entry in log(root)] == [1]
    assert ids(str(root)) == before  # the latest is still version 1, and it reads completely

    subprocess.run(
        cli("--sources", str(sources), "--root", str(root), "--no-report"), cwd=ROOT, check=True, timeout=240
    )
    assert [entry["version"] for entry in log(root)] == [1, 2]
    assert {p.name: p.stat().st_mtime_ns for p in units.glob("*.json") if p.name in finished} == finished
    assert len(ids(str(root))["traces"]) == 124


@pytest.mark.parametrize("text, message", [("[[functions]]\npath = 'f'\nglob = 1\n", "unknown key 'glob' (line 1)")])
def test_a_bad_sources_file_is_exit_2_naming_line_and_key(tmp_path, text, message):
    (tmp_path / "sources.toml").write_text(text)
    done = subprocess.run(
        cli("--sources", str(tmp_path / "sources.toml"), "--root", str(tmp_path / "r")),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and message in done.stderr
