"""A suite whose trace output fills the run's byte budget: every test still says how it ended, the run stops
cleanly after the test in flight, and the rest of the suite is traced in a fresh sandbox with a fresh budget.

Before, a full output dropped the test's `test_end`, so the host read "the test killed its runner or pytest"
(`RunInterrupted`, exit status 0) for a test that had passed, and a restart followed each time the budget
filled again. The budget here is made small (`MAX_OUTPUT_BYTES`) so that a few tests fill it.
"""

import os
import shutil
import tempfile

import pytest
import repo_fixtures as fixtures

from pipeline.sandbox import make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos import suite_run
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.repos.trace import trace_repo

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")
N_TESTS = 12

# Each test makes ~1,500 events (~150 KB of stream); 12 of them need ~1.8 MB, three times the budget below.
CHATTY = fixtures._plain(
    """
    def step(total, value):
        return total + value

    def accumulate(n):
        total = 0
        for value in range(n):
            total = step(total, value)
        return total
    """,
    "from lib.code import accumulate\n\n"
    + "\n\n".join(
        f"def test_accumulate_{i}():\n    assert accumulate({300 + i}) == {sum(range(300 + i))}\n"
        for i in range(N_TESTS)
    ),
)


# Quiet tests, then one whose output alone fills the budget: it is the suite's last test, so nothing is left to run.
CHATTY_LAST = fixtures._plain(
    CHATTY["lib/code.py"],
    "from lib.code import accumulate\n\n"
    + "\n\n".join(f"def test_quiet_{i}():\n    assert accumulate(3) == 3\n" for i in range(3))
    + "\n\ndef test_z_chatty():\n    assert accumulate(6000) == 17997000\n",
)


def trace_small_budget(tmp_path_factory, name: str, files: dict):
    """trace-repos' trace of `files` as a repository, with a trace output budget of 600 KB."""
    origin = tmp_path_factory.mktemp("origins") / name
    fixtures.make_repo(origin, files)
    spec = RepoSpec(name=name, url=str(origin), ref="main", timeout_s=300, test_timeout_s=30)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suite_run, "MAX_OUTPUT_BYTES", 600_000)
        return trace_repo(
            spec,
            make_sandbox("bwrap"),
            GitCache(str(tmp_path_factory.mktemp("git"))),
            RepoTraceSettings(max_events=100_000, parity=False),
            f"repo-0-{name}",
            pip_cache=PIP_CACHE,
        )


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return trace_small_budget(tmp_path_factory, "chatty", CHATTY)


def test_no_test_is_blamed_for_a_full_output(traced):
    failures = traced.rows("failures")
    assert [row for row in failures if row["error_type"] in ("RunInterrupted", "TestHung")] == [], failures


def test_every_test_ends_passed(traced):
    counter = traced.counters["trace"]
    assert (counter.n_in, counter.n_out, counter.dropped) == (N_TESTS, N_TESTS, {})


def test_tests_after_each_restart_are_traced(traced):
    traced_tests = {row["test_id"] for row in traced.rows("traces")}
    assert traced_tests == {f"tests/test_lib.py::test_accumulate_{i}" for i in range(N_TESTS)}


def test_a_restart_is_not_charged_for_collecting_the_suite_again():
    budget = suite_run.RunBudget(100.0)
    assert budget.wall_s() == 100.0
    budget.spend(30.0, 10.0)  # the first run: 10 s to collect, 20 s of tests, then a test killed it
    assert (budget.left_s(), budget.allowance_s) == (80.0, 90.0)
    assert budget.wall_s() == 80.0 + 10.0 + suite_run.MIN_ATTEMPT_S  # what is left, plus a startup like the first
    budget.spend(50.0, 12.0)
    assert (budget.left_s(), budget.allowance_s) == (42.0, 78.0)


@pytest.mark.parametrize("startup_s", [0.0, 3.0, 8.0, 19.0, 40.0])
def test_every_run_together_ends_within_about_twice_timeout_s(startup_s):
    budget, total = suite_run.RunBudget(20.0), 0.0
    for _ in range(suite_run.MAX_RESTARTS + 1):  # each run uses its whole wall clock, as run_suite would allow
        wall_s = budget.wall_s()
        total += wall_s
        budget.spend(wall_s, startup_s)
        if budget.left_s() < suite_run.MIN_ATTEMPT_S:
            break
    assert total <= 2 * 20.0 + suite_run.MIN_ATTEMPT_S


def test_a_full_output_at_the_last_test_starts_no_run_of_nothing(tmp_path_factory):
    """Before, the suite stopped after its last test too and the host ran "the tests left" (none): pytest collected
    nothing, exit 5, and a repository that traced every test got a `NoTests` failure."""
    output = trace_small_budget(tmp_path_factory, "chatty_last", CHATTY_LAST)
    assert output.rows("failures") == []
    counter = output.counters["trace"]
    assert (counter.n_in, counter.n_out) == (4, 4)
    assert {row["test_id"] for row in output.rows("traces")} >= {"tests/test_lib.py::test_z_chatty"}
    assert [row["restarts"] for row in output.rows("repo_runs")] == [0]


def test_a_last_test_that_ends_its_runner_starts_no_run_of_nothing(tmp_path_factory):
    """The same for the suite's last test ending pytest itself: it is named, and no empty rerun follows."""
    files = fixtures._plain(
        CHATTY["lib/code.py"],
        "import os\n\nfrom lib.code import accumulate\n\n"
        "def test_quiet():\n    assert accumulate(3) == 3\n\n\n"
        "def test_z_exit():\n    accumulate(2)\n    os._exit(0)\n",
    )
    output = trace_small_budget(tmp_path_factory, "exit_last", files)
    failures = output.rows("failures")
    assert [row["error_type"] for row in failures if row["error_type"] in ("NoTests", "Interrupted")] == []
    assert any("tests/test_lib.py::test_z_exit" in row["message"] for row in failures), failures
    assert [row["restarts"] for row in output.rows("repo_runs")] == [0]
