"""trace-repos end to end on a repository whose tests call only generator functions (repo_fixtures.GENERATORS):
every passing test yields traces, one per generator call, and their trajectories parse back.

Before generator functions were entries (tracer version 5) this repository yielded no trace at all.
"""

import os
import shutil
import tempfile

import pytest
import repo_fixtures as fixtures

from pipeline.debugger import Trace, build_forward, parse
from pipeline.engine.job import run_job
from pipeline.engine.reader import table_rows
from pipeline.kinds.repos import ReposConfig, ReposKind
from pipeline.stages.trajectories import SamplingSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")  # shared with test_repos.py
TESTS = ("test_chunked", "test_flatten_of_chunks", "test_pairwise_partly", "test_evens_raise_at_the_end")


@pytest.fixture(scope="module")
def out(tmp_path_factory, ray_local) -> str:
    root = tmp_path_factory.mktemp("generators")
    fixtures.make_repo(root / "gens", fixtures.GENERATORS)
    manifest = root / "repos.toml"
    manifest.write_text(f'[[repo]]\nname = "gens"\nurl = "{root / "gens"}"\nref = "main"\ntimeout_s = 120\n')
    config = ReposConfig(sampling=SamplingSettings(per_trace=2), cache_dir=str(root / "cache"), pip_cache_dir=PIP_CACHE)
    run_job(ReposKind(), str(manifest), config, str(root / "out"))
    return str(root / "out")


def test_every_passing_test_is_traced_and_counted(out):
    (run,) = table_rows(out, "repo_runs")
    assert (run["tests_collected"], run["tests_passed_untraced"], run["tests_traced"]) == (4, 4, 4)
    traces = list(table_rows(out, "traces"))
    assert {row["test_id"] for row in traces} == {f"tests/test_lib.py::{name}" for name in TESTS}
    assert {row["qualname"] for row in traces} == {"chunked", "flatten", "pairwise", "evens"}
    assert list(table_rows(out, "failures")) == []


def test_a_generators_trace_is_each_activation_of_its_frame(out):
    traces = {(row["test_id"].rsplit("::", 1)[1], row["qualname"]): row for row in table_rows(out, "traces")}
    chunked = traces["test_chunked", "chunked"]
    assert (chunked["input"], chunked["exit"], chunked["truncated"]) == (
        "items=[1, 2, 3, 4, 5], size=2",
        "normal",
        False,
    )
    root = [event for event in chunked["events"] if event["frame_id"] == 0]
    assert [event["arg"] for event in root if event["event"] == "return"] == ["[1, 2]", "[3, 4]", "[5]", "None"]
    assert sum(event["event"] == "call" for event in root) == 4  # its call and three resumes
    tree = build_forward(Trace.from_row(chunked))
    assert len(root) == tree.n and tree.parent[: tree.n] == [-1] * tree.n  # each activation at the root level
    flatten = traces["test_flatten_of_chunks", "flatten"]
    assert {event["function"] for event in flatten["events"]} == {"flatten", "chunked"}  # chunked: nested in it
    assert traces["test_flatten_of_chunks", "chunked"]["exit"] == "normal"  # and an entry of its own
    evens = traces["test_evens_raise_at_the_end", "evens"]
    assert evens["exit"] == "error" and evens["events"][-1]["arg"] == "LookupError('no more even items')"
    pairwise = traces["test_pairwise_partly", "pairwise"]  # dropped half-way: closed as the test returns
    if tuple(map(int, pairwise["python_version"].split(".")[:2])) >= (3, 13):  # closed without running
        assert (pairwise["exit"], pairwise["truncation_reason"]) == ("never", "test_ended")
    else:
        assert pairwise["exit"] == "error" and pairwise["events"][-1]["arg"] == "GeneratorExit()"


def test_the_traces_trajectories_parse_back(out):
    traces = {row["trace_id"] for row in table_rows(out, "traces")}
    assert len(traces) == 5  # chunked twice (once inside flatten), flatten, pairwise, evens
    trajectories = list(table_rows(out, "trajectories"))
    assert {row["trace_id"] for row in trajectories} == traces
    assert len(trajectories) == 2 * 2 * len(traces)  # forward and inverse, two each
    for row in trajectories:
        episode = parse(row["text"])
        assert episode.states and row["exit"] in ("normal", "error", "never", "entry", "cut")
