"""Repository tracing end to end: one job over a good package and repositories that go wrong.

The fixture repositories are real git repos with real commits (repo_fixtures.py). One job traces all of
them on a local Ray; each test then reads what the dataset holds. Installs use a pip download cache
kept across sessions, so only the first session downloads pytest.
"""

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import repo_fixtures as fixtures
from docker_helpers import require_docker_engine

from pipeline.engine.job import run_job
from pipeline.inspect import summarize
from pipeline.kinds.repos import ReposConfig, ReposKind
from pipeline.sandbox import make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import read_repo_manifest
from pipeline.stages.repos.trace import trace_repo
from pipeline.stages.trajectories import SamplingSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")
FAILING_REPOS = (
    "unreachable",
    "missing-ref",
    "bad-install",
    "syntax",
    "failing",
    "hang",
    "suite-hangs",
    "socket",
    "write",
    "fork-bomb",
    "flood",
)


@pytest.fixture(scope="module")
def listener():
    """A TCP server on the host's loopback: the traced conftest must not reach it (the sandbox has its own)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


@pytest.fixture(scope="module")
def repos(tmp_path_factory, listener) -> dict:
    """{name: (path, commit)} of the fixture repositories; calc is traced at tag v0.1, not at main."""
    root = tmp_path_factory.mktemp("origins")
    made = {}
    calc = root / "calc"
    made["calc"] = (calc, fixtures.make_repo(calc, fixtures.CALC))
    fixtures.git(calc, "tag", "v0.1")
    fixtures.commit(calc, fixtures.CALC_LATER, "later")
    for name, files in (
        ("bad-install", fixtures.BAD_INSTALL),
        ("syntax", fixtures.SYNTAX_ERROR),
        ("failing", fixtures.FAILING),
        ("hang", fixtures.HANG),
        ("suite-hangs", fixtures.SUITE_HANGS),
        ("socket", fixtures.socket_conftest(listener.getsockname()[1])),
        ("write", fixtures.WRITE_OUTSIDE),
        ("fork-bomb", fixtures.FORK_BOMB),
        ("flood", fixtures.FLOOD),
        ("missing-ref", fixtures.FAILING),
    ):
        made[name] = (root / name, fixtures.make_repo(root / name, files))
    return made


def manifest_text(repos: dict) -> str:
    """The repositories that go wrong get tight budgets (a hanging one ends in seconds); calc, whose traces the
    tests compare across runs and backends, the defaults (15 minutes for its run, 60 s a test): a budget of
    seconds is a race with the machine's load (a traced test aborted at 3 s on a busy machine changes its traces)."""
    parts = []
    for name, (path, _) in repos.items():
        ref = {"calc": "v0.1", "missing-ref": "no-such-branch"}.get(name, "main")
        timeout = 6 if name == "suite-hangs" else 60
        budgets = "" if name == "calc" else f"timeout_s = {timeout}\ntest_timeout_s = 3\n"
        parts.append(f'[[repo]]\nname = "{name}"\nurl = "{path}"\nref = "{ref}"\n{budgets}')
    parts.append('[[repo]]\nname = "unreachable"\nurl = "https://127.0.0.1:9/nothing.git"\nref = "main"\n')
    return "\n".join(parts)


@pytest.fixture(scope="module")
def job(repos, tmp_path_factory, ray_local):
    work = tmp_path_factory.mktemp("job")
    manifest = work / "repos.toml"
    manifest.write_text(manifest_text(repos))
    out = str(work / "out")
    config = ReposConfig(sampling=SamplingSettings(per_trace=1), cache_dir=str(work / "cache"), pip_cache_dir=PIP_CACHE)
    result = run_job(ReposKind(), str(manifest), config, out)
    tables = {
        name: ds.dataset(f"{out}/{name}", format="parquet").to_table().to_pylist()
        for name in ("traces", "trajectories", "failures", "repo_runs")
    }
    return {
        "manifest": result,
        "out": out,
        "cache": str(work / "cache"),
        "path": str(manifest),
        "config": config,
        **tables,
    }


def traces_of(job, name: str) -> list[dict]:
    return [row for row in job["traces"] if row["source_id"].startswith(f"{name}@")]


def failures_of(job, name: str) -> list[dict]:
    return [row for row in job["failures"] if row["unit_id"].endswith(f"-{name}")]


def by_call(rows: list[dict]) -> dict:
    return {(row["qualname"], row["input"]): row for row in rows}


# -- the acceptance package -------------------------------------------------------------------------------
def test_calc_traces_have_the_arguments_and_results_the_tests_used(job, repos):
    calls = by_call(traces_of(job, "calc"))
    expected = {
        ("add", "a=2, b=3"): ("normal", "5"),
        ("mean", "values=[1, 2, 3]"): ("normal", "2.0"),
        ("add", "a=3, b=3"): ("normal", "6"),  # nested in mean: its own entry too
        ("divide", "a=1, b=0"): ("error", "ZeroDivisionError('division by zero')"),
        ("scale", "values=[1, 2], factor=3"): ("normal", "[3, 6]"),
    }
    for call, (exit_, arg) in expected.items():
        row = calls[call]
        assert (row["exit"], row["events"][-1]["arg"]) == (exit_, arg), call
    push = [row for (name, _), row in calls.items() if name == "Stack.push"]
    assert len(push) == 1 and push[0]["input"].endswith(", item='a'") and push[0]["events"][-1]["arg"] == "1"
    pops = sorted(
        (row["exit"], row["events"][-1]["arg"]) for row in traces_of(job, "calc") if row["qualname"] == "Stack.pop"
    )
    assert pops == [("error", "IndexError('pop from an empty stack')"), ("normal", "'a'")]
    assert calls[("add", "a=2, b=3")]["test_id"] == "tests/test_ops.py::test_add"
    assert {row["test_id"] for (name, _), row in calls.items() if name.startswith("Stack")} == {
        "tests/test_ops.py::test_stack"
    }  # the fixture's call to Stack() belongs to the test too


def test_calc_rows_name_the_commit_the_path_and_the_function(job, repos):
    path, tagged = repos["calc"]
    rows = traces_of(job, "calc")
    assert rows and {row["commit"] for row in rows} == {tagged}  # the tag's commit, not main's
    assert {row["path"] for row in rows} == {"src/calc/ops.py"}  # never tests, conftest or site-packages
    assert {row["repo_url"] for row in rows} == {str(path)}
    add = by_call(rows)[("add", "a=2, b=3")]
    assert add["source_kind"] == "repo"
    assert add["source_id"] == f"calc@{tagged}:src/calc/ops.py:add"
    assert add["code"] == "def add(a, b):\n    total = a + b\n    return total\n"
    assert [e["source"] for e in add["events"]] == [
        "def add(a, b):",
        "    total = a + b",
        "    return total",
        "    return total",
    ]
    for row in rows:
        events = row["events"]
        assert events[0]["event"] == "call" and events[0]["parent_frame_id"] is None and events[0]["depth"] == 0
        assert [e["index"] for e in events] == list(range(row["n_events"]))
        assert row["python_version"].startswith("3.") and row["tracer_version"]
    mean = by_call(rows)[("mean", "values=[1, 2, 3]")]
    assert [e["depth"] for e in mean["events"] if e["function"] == "add"] == [1] * 12


def test_identical_traces_are_stored_once(job):
    ids = [row["trace_id"] for row in job["traces"]]
    assert len(ids) == len(set(ids))
    assert job["manifest"]["stats"]["cut"]["dropped"]["duplicate"] >= 1
    (add,) = [row for row in traces_of(job, "calc") if (row["qualname"], row["input"]) == ("add", "a=2, b=3")]
    assert add["test_id"] == "tests/test_ops.py::test_add"  # test_add_commutes calls it again: kept once


def test_trajectories_are_sampled_from_repository_traces(job):
    calc_ids = {row["trace_id"] for row in traces_of(job, "calc")}
    sampled = {row["trace_id"] for row in job["trajectories"]}
    assert calc_ids and calc_ids <= sampled
    assert all(row["text"] for row in job["trajectories"])


def test_the_good_package_has_no_failures(job):
    assert failures_of(job, "calc") == []


# -- failures: each repository's own rows, and nothing else lost -------------------------------------------
def test_every_failing_repository_has_its_failure_rows(job):
    expected = {
        "unreachable": ("clone", "CloneFailed", "cannot clone https://127.0.0.1:9/nothing.git"),
        "missing-ref": ("clone", "RefNotFound", "ref 'no-such-branch' not found"),
        "bad-install": ("install", "InstallFailed", "not-there"),
        "syntax": ("trace", "CollectionError", "SyntaxError"),
        "failing": ("trace", "TestsFailed", "tests/test_lib.py::test_fails"),
        "hang": ("trace", "TestTimeout", "tests/test_lib.py::test_hangs"),
        "suite-hangs": ("trace", "TraceTimeout", "wall-clock limit of 6s exceeded"),
        "socket": ("trace", "NetworkAccess", "('192.0.2.1', 9)"),
        "write": ("trace", "WriteOutsideScratch", "written.txt"),
        "fork-bomb": ("trace", "ForkBomb", "tests/test_lib.py::test_fork_bomb"),
        "flood": ("trace", "OutputFlood", "tests/test_lib.py::test_flood"),
    }
    for name, (stage, error_type, text) in expected.items():
        rows = failures_of(job, name)
        matching = [row for row in rows if (row["stage"], row["error_type"]) == (stage, error_type)]
        assert matching, (name, [(r["stage"], r["error_type"], r["message"]) for r in rows])
        assert text in matching[0]["message"], (name, matching[0]["message"])
        assert f"'{name}'" in matching[0]["message"] or name in matching[0]["source_id"]
    assert {row["unit_id"].split("-", 2)[2] for row in job["failures"]} <= set(FAILING_REPOS)


def test_failing_repositories_keep_the_traces_of_their_good_tests(job):
    kept = {
        "syntax": [("double", "x=1", "2")],
        "failing": [("double", "x=2", "4"), ("double", "x=3", "6")],  # a failing test is data too
        "hang": [("double", "x=5", "10"), ("double", "x=6", "12")],  # test_after ran after the hang
        "write": [("double", "x=4", "8")],
        "fork-bomb": [("double", "x=7", "14")],
        "flood": [("double", "x=8", "16")],
    }
    for name, calls in kept.items():
        got = {(row["qualname"], row["input"], row["events"][-1]["arg"]) for row in traces_of(job, name)}
        assert set(calls) <= got, (name, got)


def test_a_hung_call_is_kept_as_a_cut_trace(job):
    (row,) = [row for row in traces_of(job, "hang") if row["qualname"] == "wait_forever"]
    assert row["exit"] == "never" and row["truncated"]
    assert row["truncation_reason"] in ("test_timeout", "max_events")


def test_the_write_outside_scratch_never_landed(job, repos):
    """A write into the repository lands in the run's own copy (no later run sees it: the traced run's test
    found no file the untraced run wrote); one into the venv is refused."""
    path, _ = repos["write"]
    assert not (path / "tests" / "written.txt").exists()
    worktrees = Path(job["cache"], "git", "worktrees")
    assert not list(worktrees.rglob("written.txt"))
    rows = {row["error_type"]: row["message"] for row in failures_of(job, "write")}
    assert sorted(rows) == ["TestsFailed", "WriteOutsideScratch"], rows
    assert "tests/test_lib.py::test_writes_into_the_venv: tried to write outside" in rows["WriteOutsideScratch"]
    assert "/venv/written.txt" in rows["WriteOutsideScratch"]
    assert "1 of 3 tests failed" in rows["TestsFailed"] and "test_writes_into_the_venv" in rows["TestsFailed"]


def test_the_host_s_loopback_is_out_of_the_sandbox_s_reach(job, listener):
    assert [row["error_type"] for row in failures_of(job, "socket")] == ["NetworkAccess"]
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()  # the conftest's connection to it went to the sandbox's own loopback


def test_every_repository_has_its_yield_row(job, repos):
    runs = {row["name"]: row for row in job["repo_runs"]}
    assert set(runs) == set(repos) | {"unreachable"}
    calc = runs["calc"]
    assert calc["commit"] == repos["calc"][1] and calc["source"] == str(repos["calc"][0])
    assert calc["install_step"] is not None
    counts = [calc[name] for name in ("tests_collected", "tests_passed_untraced", "tests_passed_traced")]
    assert counts + [calc["tests_traced"], calc["top_failures"]] == [6, 6, 6, 6, []]
    assert calc["traces"] == len(traces_of(job, "calc"))
    assert runs["unreachable"]["commit"] is None and runs["unreachable"]["tests_collected"] is None
    assert runs["unreachable"]["top_failures"] == [{"error_type": "CloneFailed", "n": 1}]
    assert runs["bad-install"]["install_step"] is None and runs["bad-install"]["tests_passed_traced"] is None
    failing = runs["failing"]
    assert (failing["tests_passed_untraced"], failing["tests_passed_traced"], failing["tests_traced"]) == (1, 1, 1)
    assert {"error_type": "TestsFailed", "n": 1} in failing["top_failures"]


def test_inspect_shows_the_yield_per_repository(job):
    text = summarize(job["out"])
    assert "repositories: tests collected / passed untraced / passed traced / traced" in text
    assert "calc                 6 / 6 / 6 / 6 (100%)" in text
    assert "repositories with traces; tests traced" in text


def test_stats_count_each_stage(job):
    stats = job["manifest"]["stats"]
    assert stats["clone"]["in"] == 12 and stats["clone"]["dropped"] == {"CloneFailed": 1, "RefNotFound": 1}
    assert stats["install"]["dropped"] == {"InstallFailed": 1}
    assert stats["trace"]["events"] > 0 and stats["cut"]["out"] == len(job["traces"])


# -- both backends, same trace ids --------------------------------------------------------------------------
def _sandbox(backend: str):
    if backend == "docker":
        require_docker_engine()
    return make_sandbox(backend)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_backends_trace_the_same_ids(job, backend, tmp_path):
    """The same repository traced again (with bwrap: a second, independent run) gives the same trace ids."""
    sandbox = _sandbox(backend)
    (spec,) = [spec for spec in read_repo_manifest(job["path"]) if spec.name == "calc"]
    result = trace_repo(
        spec, sandbox, GitCache(str(tmp_path / "git")), job["config"].trace, "repo-00000-calc", pip_cache=PIP_CACHE
    )
    assert result.rows("failures") == []
    assert {row["trace_id"] for row in result.rows("traces")} == {row["trace_id"] for row in traces_of(job, "calc")}
    assert set(result.counters) == {"clone", "install", "parity", "trace", "cut"}


def test_parity_is_checked_for_every_traced_repository(job):
    from pipeline.inspect import summarize

    parity = job["manifest"]["stats"]["parity"]
    assert parity["in"] > 0 and parity["out"] <= parity["in"]
    assert {row["perturbed"] for row in traces_of(job, "calc")} == {False}  # its tests end the same untraced
    report = summarize(job["out"])
    assert f"parity: {parity['out']} of {parity['in']} tests end the same traced and untraced" in report
    assert "perturbed traces: " in report and "values rendered: structural" in report
