"""A repository's suite runs in the sandbox as its own CI would run it (classes 4, 5, 6, 7, 8 and 10 of the
wild repositories): against the tree its install built, in a writable copy per run; with loopback
networking; through collection errors whatever its options say; with doctests that restore the tracer's own
hook; without Hypothesis's timing limits, and with the time limits a test still fails named apart.

Each fixture repository (repo_fixtures.py) is a real git repo traced by `trace_repo` in the bwrap sandbox
(the parity run included), as tests/kinds/test_repos.py's direct runs do.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import repo_fixtures as fixtures

from pipeline.sandbox import make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.repos.trace import trace_repo
from tracers.trace.tracer import TRACER_VERSION

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")


def traced(root: Path, name: str, files: dict[str, str], sandbox: str = "bwrap", python=None, **settings):
    """(traces, failures, counters, cache root) of `files` as a repository traced with parity."""
    origin = root / f"origin-{name}"
    if not origin.exists():
        fixtures.make_repo(origin, files)
    spec = RepoSpec(name, str(origin), "main", timeout_s=240, test_timeout_s=60)
    cache = root / f"git-{name}-{sandbox}"
    output = trace_repo(
        spec,
        make_sandbox(sandbox, python=python),
        GitCache(str(cache)),
        RepoTraceSettings(**settings),
        f"repo-00000-{name}",
        pip_cache=PIP_CACHE,
    )
    return output.rows("traces"), output.rows("failures"), output.counters, cache


def calls(traces: list[dict]) -> set:
    return {(row["qualname"], row["input"], row["events"][-1]["arg"]) for row in traces}


def rows_of(failures: list[dict]) -> list[tuple[str, str]]:
    return [(row["error_type"], row["message"]) for row in failures]


# -- A: the installed tree, a writable copy per run (classes 5 and 6) ---------------------------------------
def test_the_suite_runs_in_a_fresh_writable_copy_of_the_installed_tree(tmp_path):
    traces, failures, counters, cache = traced(tmp_path, "writes", fixtures.WRITES_WHERE_IT_STANDS)
    assert failures == [], rows_of(failures)  # every test passed, traced and untraced alike
    assert (counters["parity"].n_in, counters["parity"].n_out) == (4, 4)
    found = calls(traces)
    assert ("config_path", "base='<repo>/tests'", "'<repo>/tests/local.cfg'") in found
    assert ("read_setting", "path='<repo>/tests/local.cfg'", "'fast'") in found
    (row,) = [row for row in traces if row["qualname"] == "config_path"]
    assert row["path"] == "src/genpkg/core.py" and row["code"].startswith("def config_path(base):\n")
    (worktree,) = [path for path in (cache / "worktrees").glob("*/*") if path.is_dir()]  # the host's checkout
    for made in ("src/genpkg/_version.py", "tests/local.cfg", ".benchmarks", "linked-src", "build"):
        assert not os.path.lexists(worktree / made), made
    assert not list(cache.rglob("local.cfg"))


# -- B: loopback networking (class 7) -------------------------------------------------------------------------
def test_a_server_on_the_sandbox_s_own_loopback_is_reached(tmp_path):
    traces, failures, counters, _ = traced(tmp_path, "loopback", fixtures.LOOPBACK)
    assert failures == [], rows_of(failures)
    assert (counters["parity"].n_in, counters["parity"].n_out) == (3, 3)
    returned = {(row["qualname"], row["events"][-1]["arg"]) for row in traces}
    assert {("roundtrip", "b'ping'"), ("send_datagram", "5"), ("pair_roundtrip", "b'pair'")} <= returned


def test_without_a_network_namespace_of_its_own_loopback_stays_refused(tmp_path):
    """The `process` backend shares the host's network: its loopback is the host's, so the guard refuses it."""
    with pytest.warns(UserWarning, match="without isolation"):
        traces, failures, _, _ = traced(tmp_path, "loopback", fixtures.LOOPBACK, sandbox="process")
    network = " ".join(row["message"] for row in failures if row["error_type"] == "NetworkAccess")
    assert "test_echo_server_on_loopback: tried to open a network connection" in network
    assert "socket.connect to ('127.0.0.1'," in network and "socket.sendto to ('127.0.0.1'," in network
    assert ("pair_roundtrip", "b'pair'") in {(row["qualname"], row["events"][-1]["arg"]) for row in traces}


# -- C: collection errors and the repository's stop options (class 4) ----------------------------------------
GOOD = {("double", "x=1", "2"), ("double", "x=2", "4"), ("double", "x=4", "8"), ("double", "x=5", "10")}


@pytest.mark.parametrize(
    "name, files",
    [("stops-early", fixtures.STOPS_EARLY), ("stops-early-otherwise", fixtures.STOPS_EARLY_OTHERWISE)],
)
def test_the_repository_s_own_options_stop_nothing(tmp_path, name, files):
    """`-x` (a package's pyproject.toml); `--maxfail=1 --sw --lf --pdb` (pytest.ini): every module is collected
    and every test runs."""
    traces, failures, counters, _ = traced(tmp_path, name, files)
    assert GOOD <= calls(traces)
    # the installer may also have looked for the module the broken file imports (it is on no index)
    unresolved = [row for row in failures if row["error_type"] == "MissingModuleUnresolved"]
    assert all("not_installed_anywhere" in row["message"] for row in unresolved), rows_of(unresolved)
    types = sorted(row["error_type"] for row in failures if row not in unresolved)
    assert types == ["CollectionError", "TestsFailed"], rows_of(failures)
    (collect,) = [row for row in failures if row["error_type"] == "CollectionError"]
    assert "tests/test_b_broken.py" in collect["message"] and "not_installed_anywhere" in collect["message"]
    (failed,) = [row for row in failures if row["error_type"] == "TestsFailed"]
    assert "1 of 5 tests failed" in failed["message"] and "tests/test_c.py::test_c_fails" in failed["message"]
    assert (counters["parity"].n_in, counters["parity"].n_out) == (5, 5)


# -- D: doctest restores the tracer's hook (class 8) ----------------------------------------------------------
def check_doctests(traces: list[dict], failures: list[dict]) -> None:
    assert failures == [], rows_of(failures)
    by_test = {(row["test_id"], row["qualname"], row["input"], row["events"][-1]["arg"]) for row in traces}
    assert {
        ("docpkg/text.py::docpkg.text.shout", "shout", "word='hi'", "'HI!'"),
        ("docpkg/text.py::docpkg.text.words", "words", "sentence='a b'", "['a', 'b']"),
        ("docpkg/text.py::docpkg.text.words", "shout", "word='b'", "'B!'"),
        ("tests/test_text.py::test_shout", "shout", "word='yo'", "'YO!'"),
    } <= by_test


def test_doctests_are_traced_under_settrace(tmp_path):
    traces, failures, counters, _ = traced(tmp_path, "doctests", fixtures.DOCTESTS, tracer_backend="settrace")
    check_doctests(traces, failures)
    assert (counters["parity"].n_in, counters["parity"].n_out) == (3, 3)
    assert {row["tracer_version"] for row in traces} == {TRACER_VERSION}


def test_doctests_are_traced_under_sys_monitoring(tmp_path):
    from python_helpers import require_python

    python = require_python("3.12")
    traces, failures, _, _ = traced(tmp_path, "doctests", fixtures.DOCTESTS, python=python, tracer_backend="monitoring")
    check_doctests(traces, failures)
    assert {row["tracer_version"] for row in traces} == {TRACER_VERSION + "+monitoring"}


# -- E: tests that time themselves (class 10) -----------------------------------------------------------------
def test_hypothesis_timing_limits_are_lifted_and_the_rest_named_apart(tmp_path):
    traces, failures, counters, _ = traced(tmp_path, "timed", fixtures.TIMED)
    types = {row["error_type"]: row["message"] for row in failures}
    assert sorted(types) == ["OutcomePerturbed", "OutcomePerturbedTiming", "TestsFailed"], rows_of(failures)
    timing = types["OutcomePerturbedTiming"]
    assert "2 of 5 tests" in timing
    assert "tests/test_lib.py::test_own_deadline (passed untraced, failed traced)" in timing
    assert "tests/test_lib.py::test_own_timeout (passed untraced, failed traced)" in timing
    assert "1 of 5 tests" in types["OutcomePerturbed"] and "test_own_duration_assertion" in types["OutcomePerturbed"]
    assert "3 of 5 tests failed" in types["TestsFailed"]
    assert counters["parity"].dropped == {"perturbed": 1, "perturbed_timing": 2}
    slow = [row for row in traces if row["qualname"] == "slow_sum"]
    passed = {row["test_id"].split("::")[1] for row in slow if row["perturbed"] is False}
    assert passed == {"test_inherits_the_suite_profile", "test_own_settings_inherit_the_deadline"}
    inherited = [row for row in slow if row["test_id"].endswith("::test_inherits_the_suite_profile")]
    assert 1 <= len(inherited) <= 4  # the suite's profile (max_examples=4) still holds, only untimed
