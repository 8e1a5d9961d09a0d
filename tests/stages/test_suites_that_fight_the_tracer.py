"""Repository suites that fight the tracer end as failure rows, and the tests after them are still traced
(issue 10, item 10).

Each hostile repository is a real git repo traced by `trace_repo` in the bwrap sandbox: its conftest
replaces `sys.settrace`, turns tracing off or installs its own hook during some tests, disables the
in-process watchdog before a test blocks forever, or patches the tracer's modules and `json`; one test kills
the runner outright. Every case is a
failure row naming the repository, the cause and the tests concerned, and the ordinary tests beside the
hostile ones come out traced exactly as in a plain suite.
"""

import os
import shutil
import tempfile
import textwrap

import pytest
import repo_fixtures as fixtures

from pipeline.sandbox import make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.repos.trace import trace_repo

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")

ORDINARY = {("double", "x=5", "10"), ("double", "x=6", "12")}


def around(hostile: str = "") -> str:
    """The ordinary tests, with a hostile one (its imports and test) between them."""
    before = "from lib.code import double\n\ndef test_before():\n    assert double(5) == 10\n"
    return before + textwrap.dedent(hostile) + "\ndef test_after():\n    assert double(6) == 12\n"


SETTRACE_REPLACED = fixtures._plain(
    fixtures.SIMPLE_LIB,
    around(),
    {
        "tests/conftest.py": """
        import sys, threading

        sys.settrace = lambda hook: None  # every later settrace call does nothing
        threading.settrace = lambda hook: None
        """
    },
)

TRACING_OFF = fixtures._plain(
    fixtures.SIMPLE_LIB,
    around(),
    {
        "tests/test_off.py": """
        import sys, threading
        from lib.code import double

        def own_hook(frame, event, arg):
            return None

        def test_off():
            sys.settrace(None)
            assert double(7) == 14

        def test_own_hook():
            sys.settrace(own_hook)
            assert double(8) == 16

        def test_threading_settrace():
            threading.settrace(own_hook)  # only threads started later: the traced thread keeps its hook
            assert double(9) == 18
            threading.settrace(None)
        """,
        "tests/conftest.py": """
        import sys
        import pytest

        @pytest.fixture(autouse=True)
        def quiet(request):
            if request.node.name == "test_fixture_off":
                sys.settrace(None)
            yield
        """,
        "tests/test_fixture.py": """
        from lib.code import double

        def test_fixture_off():
            assert double(10) == 20
        """,
    },
)

WATCHDOG_KILLED = fixtures._plain(
    fixtures.SIMPLE_LIB,
    around(
        """
        import threading

        def test_blocks():
            threading.Event().wait()
        """
    ),
    {
        "tests/conftest.py": """
        import gc, signal

        # The in-process watchdog is disarmed: every Guard checks nothing, its abort signal is ignored.
        for obj in gc.get_objects():
            if type(obj).__name__ == "Guard":
                obj._check = lambda: None
        for number in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):
            signal.signal(number, signal.SIG_IGN)
        """
    },
)

KILLS_THE_RUNNER = fixtures._plain(
    fixtures.SIMPLE_LIB,
    around(
        """
        import os, signal, time

        def test_kills_the_runner():
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(3600)
        """
    ),
)

TRACER_PATCHED = fixtures._plain(
    fixtures.SIMPLE_LIB,
    around(),
    {
        "tests/conftest.py": """
        import json, sys

        # Everything the tracer's own modules use, replaced before any test runs.
        json.dumps = lambda *args, **kwargs: '{"forged": true}'
        json.JSONEncoder.encode = lambda self, value: '{"forged": true}'
        for name, module in list(sys.modules.items()):
            if name.startswith("tracers"):
                for attribute, value in list(vars(module).items()):
                    if isinstance(value, type) and value.__module__ == name:
                        for method in ("__call__", "_repr", "write", "emit", "_emit"):
                            if method in vars(value):
                                setattr(value, method, lambda self, *args, **kwargs: "forged")
        """
    },
)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """{name: (traces rows, failures rows)} of each hostile repository, traced in bwrap."""
    root = tmp_path_factory.mktemp("fight")
    sandbox = make_sandbox("bwrap")
    cache = GitCache(str(root / "git"))
    settings = RepoTraceSettings(parity=False)
    results = {}
    for name, files in (
        ("settrace-replaced", SETTRACE_REPLACED),
        ("tracing-off", TRACING_OFF),
        ("watchdog-killed", WATCHDOG_KILLED),
        ("kills-the-runner", KILLS_THE_RUNNER),
        ("tracer-patched", TRACER_PATCHED),
    ):
        fixtures.make_repo(root / name, files)
        spec = RepoSpec(name, str(root / name), "main", timeout_s=120, test_timeout_s=2)
        output = trace_repo(spec, sandbox, cache, settings, f"repo-00000-{name}", pip_cache=PIP_CACHE)
        results[name] = (output.rows("traces"), output.rows("failures"))
    return results


def calls(rows: list[dict]) -> set:
    return {(row["qualname"], row["input"], row["events"][-1]["arg"]) for row in rows if row["exit"] == "normal"}


def only_failure(failures: list[dict], error_type: str) -> dict:
    assert [row["error_type"] for row in failures] == [error_type], [(r["error_type"], r["message"]) for r in failures]
    return failures[0]


def test_a_replaced_settrace_is_reported_and_traced_anyway(traced):
    traces, failures = traced["settrace-replaced"]
    assert calls(traces) == ORDINARY
    row = only_failure(failures, "TracerTampered")
    assert "'settrace-replaced'" in row["message"] and "sys.settrace and threading.settrace" in row["message"]


def test_tests_that_turn_the_tracer_off_are_named(traced):
    traces, failures = traced["tracing-off"]
    assert ORDINARY <= calls(traces)
    row = only_failure(failures, "TracerDisabled")
    assert "'tracing-off'" in row["message"] and "in 3 test(s)" in row["message"]
    for test in ("tests/test_off.py::test_off", "tests/test_off.py::test_own_hook", "test_fixture_off"):
        assert test in row["message"]
    assert "test_threading_settrace" not in row["message"]
    assert ("double", "x=9", "18") in calls(traces)  # threading.settrace left the traced thread alone


def test_a_disarmed_watchdog_costs_only_the_blocking_test(traced):
    traces, failures = traced["watchdog-killed"]
    assert calls(traces) == ORDINARY, failures  # test_after ran after the hang, in a fresh sandbox
    row = only_failure(failures, "TestHung")
    assert "'watchdog-killed'" in row["message"] and "tests/test_lib.py::test_blocks ran past" in row["message"]
    assert "the tests after it ran in a fresh sandbox" in row["message"]


def test_a_test_that_kills_its_runner_costs_only_itself(traced):
    traces, failures = traced["kills-the-runner"]
    assert calls(traces) == ORDINARY
    row = only_failure(failures, "RunInterrupted")
    assert "tests/test_lib.py::test_kills_the_runner the run ended while it was running" in row["message"]


def test_a_suite_that_patches_the_tracer_s_modules_changes_nothing_it_records(traced):
    """The repository runner runs sealed copies of the tracer (tracers/guard/seal.py), as the function runner does."""
    traces, failures = traced["tracer-patched"]
    assert calls(traces) == ORDINARY and failures == []
    assert "forged" not in repr(traces)
