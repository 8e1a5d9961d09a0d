"""The yield in a repository's `repo_runs` row: which tests count as traced (pipeline/stages/repos/summary.py)."""

from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.stream import ParsedStream, ParsedTest
from pipeline.stages.repos.summary import repo_run_row


def row(tests, baseline, traced_tests):
    stream = ParsedStream(tests=[ParsedTest(nodeid, outcome=outcome) for nodeid, outcome in tests])
    spec = RepoSpec(name="r", url="/r", ref="main")
    return repo_run_row(spec, "repo-0", "c0ffee", None, stream, baseline, traced_tests, 0, [])


def test_a_test_counts_as_traced_when_it_passed_untraced_and_made_an_entry():
    tests = [("t::a", "passed"), ("t::b", "passed"), ("t::c", "passed"), ("t::d", "failed")]
    baseline = {"t::a": "passed", "t::b": "failed", "t::c": "passed", "t::d": "passed"}
    counted = row(tests, baseline, {"t::a", "t::b", "t::d"})
    assert (counted["tests_passed_untraced"], counted["tests_passed_traced"], counted["tests_traced"]) == (3, 3, 2)


def test_ids_that_vary_between_runs_count_by_their_traced_outcome():
    """A parameter id built from a set's order (hash(None) varies per process before 3.12) names a test in the
    traced run that the untraced run called otherwise: it is judged by its traced outcome, not dropped."""
    tests = [("t::p[x0]", "passed"), ("t::p[x1]", "failed"), ("t::q", "passed")]
    baseline = {"t::p[y0]": "passed", "t::p[y1]": "passed", "t::q": "passed"}
    counted = row(tests, baseline, {"t::p[x0]", "t::p[x1]", "t::q"})
    assert counted["tests_traced"] == 2
    assert row(tests, None, {"t::p[x0]", "t::q"})["tests_traced"] == 2  # no parity run: the traced outcomes
