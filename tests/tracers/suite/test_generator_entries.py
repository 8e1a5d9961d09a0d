"""Generator functions are entries: one entry per call, its events every activation of the generator's frame (its
call to its first yield, each resume to its next yield, to the end), cut from the stream as one trace.

The programs are generator_programs.py's, each run as a test by the entry tracer in a fresh process: settrace under
this interpreter, both backends under pyenv's CPython 3.12 and 3.13, which must write the same stream. Every entry
cut from them must be a trace the debugger walks (forward and inverse trees, trajectories whose text parses back).
"""

import functools
import json
import sys
import tempfile
from pathlib import Path

import pytest
from entry_helpers import Traced
from python_helpers import MONITORING_VERSIONS, require_python, run_script

from pipeline.debugger import PolicyConfig, Trace, build_forward, build_inverse, parse, sample_trajectories
from pipeline.stages.repos.cut import cut_entry
from pipeline.stages.repos.stream import parse_repo_stream

PROGRAMS = Path(__file__).resolve().parent / "generator_programs.py"
RUNS = [("this", "settrace")] + [(v, backend) for v in MONITORING_VERSIONS for backend in ("settrace", "monitoring")]


@functools.cache
def traced(version: str, backend: str) -> dict:
    """{"stream": the raw stream, "version": (major, minor), "tests": {nodeid: ParsedTest},
    "entries": {nodeid: [(entry, cut events)]}} of the programs run by one interpreter ("this": the tests')
    and backend."""
    python = sys.executable if version == "this" else require_python(version)
    with tempfile.TemporaryDirectory() as work:
        out = run_script(python, PROGRAMS, backend, work)
    parsed = parse_repo_stream(out["stream"].encode(), 10**6)
    assert parsed.error is None, parsed.error
    return {
        "stream": out["stream"],
        "version": tuple(out["version"]),
        "tests": {test.nodeid: test for test in parsed.tests},
        "entries": {test.nodeid: [(e, cut_entry(test.events, e)) for e in test.entries] for test in parsed.tests},
    }


@pytest.fixture(params=RUNS, ids=["-".join(run) for run in RUNS])
def run(request) -> dict:
    return traced(*request.param)


def entry_of(run: dict, nodeid: str, qualname: str) -> tuple[dict, list[dict]]:
    (found,) = [(entry, events) for entry, events in run["entries"][nodeid] if entry["qualname"] == qualname]
    return found


def activations(events: list[dict]) -> list[list[tuple[str, str]]]:
    """The generator frame's (frame 0's) own events, (event, source) each, split at each call: one list per
    activation."""
    out: list[list[tuple[str, str]]] = []
    for event in events:
        if event["frame_id"] == 0:
            if event["event"] == "call":
                out.append([])
            out[-1].append((event["event"], event["source"].strip()))
    return out


def test_a_consumed_generator_is_one_entry_over_all_its_activations(run):
    entry, events = entry_of(run, "test_list", "numbers")
    assert (entry["input"], entry["exit"], entry["truncated"]) == ("n=3", "normal", False)
    assert [e["index"] for e in events] == list(range(entry["n"])) and len(events) == entry["n"] == 27
    assert len(entry["ranges"]) == 4 and sum(n for _, n in entry["ranges"]) == entry["n"]
    steps = activations(events)
    first = ["def numbers(n):", "for i in range(n):", "yield inner(i)", "yield inner(i)"]
    assert steps[0] == list(zip(["call", "line", "line", "return"], first, strict=True))
    assert all(step[0] == ("call", "yield inner(i)") for step in steps[1:])  # each resume, at its yield
    assert [e["arg"] for e in events if e["frame_id"] == 0 and e["event"] == "return"] == ["1", "2", "3", "None"]
    assert all(e["parent_frame_id"] is None and e["depth"] == 0 for e in events if e["frame_id"] == 0)
    callees = [e for e in events if e["frame_id"] != 0]  # each inner call, a new frame under the generator's
    assert {e["frame_id"] for e in callees} == {1, 2, 3}
    assert all(e["parent_frame_id"] == 0 and e["depth"] == 1 for e in callees)
    assert [entry["qualname"] for entry, _ in run["entries"]["test_list"]] == ["inner"] * 3 + ["numbers"]


def test_a_generator_resumed_from_another_depth_has_each_activation_at_its_own_depth(run):
    entry, events = entry_of(run, "test_depths", "numbers")
    assert entry["exit"] == "normal" and len(entry["ranges"]) == 4
    stream = run["tests"]["test_depths"].events
    resumes = [stream[start] for start, _ in entry["ranges"]]
    assert [e["depth"] for e in resumes] == [0, 1, 0, 0]  # the second resume came from pull(), a repository call
    assert resumes[1]["parent_frame_id"] is not None
    assert all(e["parent_frame_id"] is None and e["depth"] == 0 for e in events if e["frame_id"] == 0)
    assert {e["depth"] for e in events if e["frame_id"] != 0} == {1}
    pull, pulled = entry_of(run, "test_depths", "pull")
    assert pull["exit"] == "normal" and pulled[-1]["arg"] == "2"
    inside = [e for e in pulled if e["function"] == "numbers"]  # pull's trace holds the resume it made
    assert [e["event"] for e in inside] == ["call", "line", "line", "return"] and {e["depth"] for e in inside} == {1}


def test_yield_from_a_repository_generator_nests_its_entry(run):
    chain, chain_events = entry_of(run, "test_yield_from", "chain")
    numbers, numbers_events = entry_of(run, "test_yield_from", "numbers")
    assert chain["exit"] == numbers["exit"] == "normal" and not chain["truncated"]
    # a generator whose last statement is `yield from` returns after the StopIteration it gets (3.12+)
    assert (chain_events[-1]["event"], chain_events[-1]["frame_id"], chain_events[-1]["arg"]) == ("return", 0, "None")
    assert [e["arg"] for e in chain_events if e["frame_id"] == 0 and e["event"] == "return"] == ["-1", "1", "2", "None"]
    inner_ranges = [range(start, start + n) for start, n in numbers["ranges"]]
    outer_ranges = [range(start, start + n) for start, n in chain["ranges"]]
    assert all(any(r.start >= o.start and r.stop <= o.stop for o in outer_ranges) for r in inner_ranges)
    nested = [(e["event"], e["function"]) for e in chain_events if e["depth"] >= 1]
    assert nested == [(e["event"], e["function"]) for e in numbers_events]
    echo, echo_events = entry_of(run, "test_yield_of_yield_from", "echo")  # `yield (yield from numbers(1))`
    yielded = [e["arg"] for e in echo_events if e["event"] == "return" and e["frame_id"] == 0]
    assert echo["exit"] == "normal" and yielded == ["1", "None", "None"]  # it yields what `yield from` returned


def test_a_generator_closed_early_ends_with_its_generator_exit(run):
    entry, events = entry_of(run, "test_close", "guarded")
    assert (entry["exit"], entry["truncated"]) == ("error", False)
    assert activations(events)[1] == [
        ("call", "yield 1"),
        ("exception", "yield 1"),  # close() throws GeneratorExit in at the yield
        ("line", "done = True"),  # the finally runs
        ("exception", "done = True"),  # and the frame leaves with it
    ]
    assert events[-1]["arg"] == "GeneratorExit()"
    entry, events = entry_of(run, "test_break", "numbers")  # a for loop that breaks drops (closes) it
    if run["version"] >= (3, 13):  # CPython closes a generator suspended outside any try without running it
        assert (entry["exit"], entry["reason"]) == ("never", "test_ended") and events[-1]["arg"] == "2"
    else:
        assert (entry["exit"], entry["truncated"]) == ("error", False) and events[-1]["arg"] == "GeneratorExit()"
        assert activations(events)[-1] == [("call", "yield inner(i)"), ("exception", "yield inner(i)")]


def test_an_exception_thrown_in_and_caught_is_not_its_end(run):
    entry, events = entry_of(run, "test_throw", "catcher")
    assert (entry["exit"], entry["truncated"]) == ("normal", False) and len(entry["ranges"]) == 3
    assert activations(events)[1][:3] == [("call", "yield 1"), ("exception", "yield 1"), ("line", "except KeyError:")]


def test_a_generator_suspended_when_its_test_ends_is_cut_and_not_an_entry_later(run):
    entry, events = entry_of(run, "test_partial", "numbers")
    assert (entry["exit"], entry["truncated"], entry["reason"]) == ("never", True, "test_ended")
    assert "ranges" not in entry and events[-1]["event"] == "return" and events[-1]["arg"] == "1"
    later = run["entries"]["test_resumed_in_a_later_test"]
    assert [entry["qualname"] for entry, _ in later] == ["inner"] * 4  # its resumes there open no entry
    assert all(events[0]["depth"] == 0 and events[0]["parent_frame_id"] is None for _, events in later)


def test_a_generator_that_raises_ends_with_its_error(run):
    entry, events = entry_of(run, "test_raises", "explodes")
    assert (entry["exit"], entry["truncated"], entry["input"]) == ("error", False, "n=3")
    assert (events[-1]["event"], events[-1]["arg"]) == ("exception", "ValueError(3)")
    assert [e["event"] for e in events] == ["call", "line", "return", "call", "line", "exception"]


def test_calls_between_resumes_are_entries_of_their_own_and_not_the_generators(run):
    marks = run["entries"]["test_interleaved"]
    assert [(entry["qualname"], entry["input"]) for entry, _ in marks] == [
        ("inner", "x=0"),
        ("inner", "x=10"),
        ("inner", "x=1"),
        ("inner", "x=20"),
        ("inner", "x=2"),
        ("numbers", "n=3"),
    ]
    entry, events = entry_of(run, "test_interleaved", "numbers")
    assert entry["exit"] == "normal" and not entry["truncated"]
    assert {e["locals"][0][1] for e in events if e["function"] == "inner" and e["event"] == "call"} == {"0", "1", "2"}
    stream = run["tests"]["test_interleaved"].events
    gaps = [(a + n, b) for (a, n), (b, _) in zip(entry["ranges"], entry["ranges"][1:], strict=False)]
    between = [[e["locals"][0][1] for e in stream[a:b] if e["event"] == "call"] for a, b in gaps]
    assert between == [["10"], ["20"], []]  # the test's own calls, left out of the generator's entry
    for mark, cut in marks[:-1]:
        assert not mark["truncated"] and [e["event"] for e in cut] == ["call", "line", "line", "return"]


def test_the_event_budget_counts_every_activation_and_nothing_is_recorded_past_it(run):
    entry, events = entry_of(run, "test_past_budget", "numbers")
    assert (entry["exit"], entry["truncated"], entry["reason"]) == ("never", True, "max_events")
    assert len(events) == entry["n"] == 60 and len(entry["ranges"]) == 8
    # past its budget, its resumes record nothing: no other entry is open to want them
    assert len(run["tests"]["test_past_budget"].events) == 60


def test_a_generator_past_its_budget_resumed_inside_an_entry_is_recorded_for_that_entry(run):
    numbers, _ = entry_of(run, "test_drain_past_budget", "numbers")
    drain, events = entry_of(run, "test_drain_past_budget", "drain")
    assert numbers["reason"] == drain["reason"] == "max_events" and numbers["n"] == drain["n"] == 60
    resumes = [e for e in events if e["function"] == "numbers"]
    assert resumes and {e["depth"] for e in resumes} == {1} and resumes[0]["event"] == "call"
    build_forward(Trace.from_row(_row(drain, events)))  # whole activations: no event is missing inside drain's


def _row(entry: dict, events: list[dict]) -> dict:
    return {
        "trace_id": f"{entry['qualname']}-{entry['start']}",
        "source_id": entry["qualname"],
        "source_kind": "repo",
        "code": "",
        "exit": entry["exit"],
        "events": events,
    }


def test_every_entry_is_a_trace_the_debugger_walks(run):
    config = PolicyConfig()
    walked = 0
    for marks in run["entries"].values():
        for entry, events in marks:
            trace = Trace.from_row(_row(entry, events))
            forward = build_forward(trace)
            build_inverse(trace, forward)
            roots = [i for i in range(len(events)) if forward.parent[i] == -1 and events[i]["event"] == "call"]
            assert len(roots) == len(entry.get("ranges", [None]))  # one root-level activation per range
            for trajectory in sample_trajectories(trace, config, seed=7, k=4):
                assert parse(trajectory.text) == trajectory.episode
            walked += 1
    assert walked > 30


@pytest.mark.parametrize("version", MONITORING_VERSIONS)
def test_both_backends_write_the_same_stream(version):
    streams = {backend: traced(version, backend)["stream"] for backend in ("settrace", "monitoring")}
    headers = {backend: json.loads(stream.split("\n", 1)[0]) for backend, stream in streams.items()}
    assert [header["tracer_backend"] for header in headers.values()] == ["settrace", "monitoring"]
    assert streams["settrace"].split("\n", 1)[1] == streams["monitoring"].split("\n", 1)[1]


GENERATOR = """
def inner(x):
    y = x + 1
    return y

def numbers(n):
    for i in range(n):
        yield inner(i)
"""


@pytest.mark.parametrize(
    "ranges, error",
    [
        ([[0, 8], [4, 8], [16, 8], [24, 3]], "range 1 starts at 4, before 8: out of order or overlapping"),
        ([[0, 8], [16, 8], [8, 8], [24, 3]], "range 2 starts at 8, before 24: out of order or overlapping"),
        ([[0, 8], [8, 8], [16, 8], [27, 3]], "range 3 ends past the entry's end"),
        ([[0, 8], [8, 8], [16, 8], [24, 2]], "its ranges hold 26 events, not n=27"),
        ([[0, 1]] * 28, "ranges must be 2 to n=27 [start, n] pairs"),
        ([[0, 27]], "ranges must be 2 to n=27 [start, n] pairs"),
        ([[1, 7], [8, 8], [16, 8], [24, 4]], "its first range starts at 1, not at its start 0"),
        ([[0, 9], [9, 7], [16, 8], [24, 3]], "range 0 does not end with its frame's yield"),
        ([[0, 8], [9, 7], [16, 8], [24, 4]], "range 1 does not start with its frame's call"),
        ([[0, 8], [8, 0], [8, 16], [24, 3]], "range 1 is not a [start, n] pair"),
        ([[0, 8], "8+8", [16, 8], [24, 3]], "range 1 is not a [start, n] pair"),
        ({"0": 27}, "ranges must be 2 to n=27 [start, n] pairs"),
    ],
)
def test_forged_ranges_are_refused_and_earlier_tests_are_kept(tmp_path, ranges, error):
    traced = Traced(tmp_path, GENERATOR)
    traced.run(lambda m: m.inner(1), nodeid="test_before")
    traced.run(lambda m: list(m.numbers(3)), nodeid="test_generator")
    lines = traced.buffer.getvalue().splitlines()
    (at,) = [i for i, line in enumerate(lines) if '"qualname":"numbers"' in line]
    entry = json.loads(lines[at])
    assert entry["ranges"] == [[0, 8], [8, 8], [16, 8], [24, 3]] and entry["n"] == 27  # as the tracer wrote it
    lines[at] = json.dumps(dict(entry, ranges=ranges))
    stream = parse_repo_stream(("\n".join(lines) + "\n").encode(), 10**6)
    assert stream.error == f"line {at + 1}: entry: {error}"
    assert [test.nodeid for test in stream.tests] == ["test_before"]
