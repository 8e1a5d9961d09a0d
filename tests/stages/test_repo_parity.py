"""Repository tracing changes no test's outcome: values are rendered without running the program's code,
and an untraced run of the suite checks it test by test (`perturbed`, `OutcomePerturbed`).

The fixture repositories are real git repos (repo_fixtures.py): `side-effects` has a clock-driven cache
whose __repr__ expires entries, classes that count calls of __repr__/__str__/__hash__/__eq__/__iter__/
__len__/__getattr__, a lazy property and an exception with a side-effecting __str__; its own tests assert
that none of those counters moved. `tracer-aware` has one test that inspects sys.gettrace().
"""

import os
import shutil
import tempfile

import pytest
import repo_fixtures as fixtures

from pipeline.sandbox import make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.repos.trace import trace_repo
from pipeline.stages.trace_functions import ReprLimits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")
SIDE_EFFECT_TESTS = {
    "tests/test_lib.py::test_cache_entry_survives_until_its_deadline",
    "tests/test_lib.py::test_tokens_are_never_printed_hashed_or_compared",
    "tests/test_lib.py::test_config_is_never_loaded",
}


@pytest.fixture(scope="module")
def origins(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("origins")
    for name, files in (("side-effects", fixtures.SIDE_EFFECTS), ("tracer-aware", fixtures.TRACER_AWARE)):
        fixtures.make_repo(root / name, files)
    return {name: str(root / name) for name in ("side-effects", "tracer-aware")}


def traced(origins, tmp_path_factory, name: str, **settings):
    spec = RepoSpec(name=name, url=origins[name], ref="main", timeout_s=120, test_timeout_s=20)
    cache = GitCache(str(tmp_path_factory.mktemp("git")))
    output = trace_repo(
        spec, make_sandbox("bwrap"), cache, RepoTraceSettings(**settings), f"repo-0-{name}", pip_cache=PIP_CACHE
    )
    return output.rows("traces"), output.rows("failures"), output.counters


@pytest.fixture(scope="module")
def structural(origins, tmp_path_factory):
    return traced(origins, tmp_path_factory, "side-effects")


def test_side_effecting_classes_pass_traced_with_full_parity(structural):
    traces, failures, counters = structural
    assert failures == []  # no test failed under the tracer, none ended otherwise than untraced
    parity = counters["parity"]
    assert (parity.n_in, parity.n_out, parity.dropped) == (3, 3, {})
    assert counters["trace"].n_out == 3  # all three passed traced (the tests assert the counters are 0)
    assert traces and {row["perturbed"] for row in traces} == {False}
    assert {row["repr_mode"] for row in traces} == {"structural"}
    assert {row["test_id"] for row in traces} == SIDE_EFFECT_TESTS


def test_locals_are_rendered_from_state_without_calling_the_objects(structural):
    traces, _, _ = structural
    values = {value for row in traces for event in row["events"] for _, value in event["locals"]}
    args = {event["arg"] for row in traces for event in row["events"] if event["arg"] is not None}
    assert "TTLCache(clock=Clock(now=1), ttl=2, entries={'a': (1, 3)})" in values
    assert "[Token(name='a'), Token(name='b')]" in values  # a list subclass, walked without its __iter__
    assert "Config(path='settings.toml', _data=None)" in values  # the lazy property never loaded
    assert "Failing('settings.toml')" in args  # the exception's type and args, not its __str__
    rendered = " ".join(values | args)
    assert "TTLCache([" not in rendered and "Token('a')" not in rendered and "failing" not in rendered


def test_the_user_repr_mode_perturbs_the_suite_and_parity_flags_it(origins, tmp_path_factory, structural):
    traces, failures, counters = traced(origins, tmp_path_factory, "side-effects", reprs=ReprLimits(mode="user"))
    (row,) = [row for row in failures if row["error_type"] == "OutcomePerturbed"]
    assert row["stage"] == "trace" and "3 of 3 tests" in row["message"]
    assert "passed untraced, failed traced" in row["message"]
    assert counters["parity"].dropped == {"perturbed": 3}
    assert traces and {row["perturbed"] for row in traces} == {True}
    assert {row["repr_mode"] for row in traces} == {"user"}


def test_a_test_that_depends_on_the_tracer_is_flagged(origins, tmp_path_factory):
    traces, failures, counters = traced(origins, tmp_path_factory, "tracer-aware")
    (row,) = [row for row in failures if row["error_type"] == "OutcomePerturbed"]
    assert "1 of 2 tests" in row["message"]
    assert "tests/test_lib.py::test_depends_on_the_tracer (passed untraced, failed traced)" in row["message"]
    assert (counters["parity"].n_in, counters["parity"].n_out) == (2, 1)
    perturbed = {(row["test_id"].split("::")[1], row["perturbed"]) for row in traces}
    assert perturbed == {("test_ordinary", False), ("test_depends_on_the_tracer", True)}


def test_without_the_parity_run_nothing_is_compared(origins, tmp_path_factory):
    traces, failures, counters = traced(origins, tmp_path_factory, "tracer-aware", parity=False)
    assert [row["error_type"] for row in failures] == ["TestsFailed"]
    assert traces and {row["perturbed"] for row in traces} == {None}
    assert counters["parity"].n_in == 0
