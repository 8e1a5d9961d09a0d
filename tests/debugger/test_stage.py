"""The trajectories stage: rows that match the schema, failures for bad traces, never a crash."""

import pyarrow as pa
import pytest

from debugger_helpers import WORKED_EXAMPLE, synthetic_row, trace_row
from pipeline.debugger import PolicyConfig, Trace, build_forward, build_inverse, parse, sample_trajectories
from pipeline.stages.trajectories import sample_trajectories_stage
from schemas import schema_of
from schemas import trajectories as trajectories_schema


def _stage(rows, per_trace=2, seed=7):
    return sample_trajectories_stage(rows, PolicyConfig(), seed, per_trace, "unit-0")


def _arrow_round_trip(row: dict) -> dict:
    """The row as `traces` shards give it back (locals as a list of pairs)."""
    from schemas import traces

    full = {"python_version": "3.11", "tracer_version": "1", "qualname": "f", "input": "", "repo_url": None,
            "commit": None, "path": None, "truncation_reason": None, **row}
    for event in full["events"]:
        event.setdefault("parent_frame_id", None)
    return pa.Table.from_pylist([full], schema=traces.SCHEMA).to_pylist()[0]


def test_rows_match_the_schema_and_are_deterministic():
    rows_in = [_arrow_round_trip(trace_row(WORKED_EXAMPLE, "f", "3", trace_id="w")),
               _arrow_round_trip(synthetic_row(3))]
    rows, failures, counters = _stage(rows_in)
    assert failures == []
    table = pa.Table.from_pylist(rows, schema=trajectories_schema.SCHEMA)
    assert table.num_rows == len(rows) == 2 * 2 * 2
    assert schema_of("trajectories") is trajectories_schema.SCHEMA
    assert [(r["trace_id"], r["direction"], r["sample_index"]) for r in rows] == [
        (t, d, i) for t in ("w", "synthetic-3") for d in ("forward", "inverse") for i in range(2)]
    for row in rows:
        assert row["n_tokens"] == len(row["text"].encode())
        assert len(row["states"]) == len(row["actions"]) + 1
        episode = parse(row["text"])
        assert len(episode.states) == len(row["states"])
        assert row["exit"] in ({"normal", "error", "never", "cut"} if row["direction"] == "forward"
                               else {"entry", "cut"})
    assert len({r["trajectory_id"] for r in rows}) == len(rows)
    assert _stage(rows_in)[0] == rows
    assert counters.as_dict()["in"] == 2 and counters.as_dict()["out"] == 8


def test_every_field_is_documented():
    from schemas.fields import doc_of

    assert all(doc_of(field) for field in trajectories_schema.SCHEMA)


BAD_ROWS = [
    ({"trace_id": "empty", "source_id": "s", "exit": "normal", "events": []}, "EmptyTrace"),
    ({"trace_id": "noexit", "source_id": "s", "events": []}, "MalformedTrace"),
    ({"trace_id": "exc-only", "source_id": "s", "exit": "error",
      "events": [{"event": "exception", "frame_id": 0, "source": "x", "locals": [], "arg": "E()"}]},
     "MalformedTrace"),
    ({"trace_id": "orphan", "source_id": "s", "exit": "normal",
      "events": [{"event": "call", "frame_id": 0, "source": "def f():", "locals": [], "arg": None},
                 {"event": "line", "frame_id": 5, "source": "x", "locals": [], "arg": None}]}, "MalformedTrace"),
    ({"trace_id": "kind", "source_id": "s", "exit": "normal",
      "events": [{"event": "jump", "frame_id": 0, "source": "", "locals": [], "arg": None}]}, "MalformedTrace"),
    ({"trace_id": "locals", "source_id": "s", "exit": "normal",
      "events": [{"event": "call", "frame_id": 0, "source": "", "locals": 5, "arg": None}]}, "MalformedTrace"),
    ({"trace_id": "dots", "source_id": "s", "exit": "normal",
      "events": [{"event": "call", "frame_id": 0, "source": "", "locals": [("..", "1")], "arg": None},
                 {"event": "return", "frame_id": 0, "source": "", "locals": [], "arg": "1"}]}, "MalformedTrace"),
    ({"trace_id": "arg", "source_id": "s", "exit": "normal",
      "events": [{"event": "call", "frame_id": 0, "source": "", "locals": [], "arg": None},
                 {"event": "return", "frame_id": 0, "source": "", "locals": [], "arg": 7}]}, "MalformedTrace"),
    ("not a row", "MalformedTrace"),
]


@pytest.mark.parametrize("row,error_type", BAD_ROWS, ids=[str(r[0])[:30] if isinstance(r[0], str) else
                                                          r[0]["trace_id"] for r in BAD_ROWS])
def test_bad_traces_become_failure_rows(row, error_type):
    good = trace_row(WORKED_EXAMPLE, "f", "3", trace_id="good")
    rows, failures, counters = _stage([row, good])
    assert len(failures) == 1 and failures[0]["error_type"] == error_type
    assert failures[0]["stage"] == "trajectories" and failures[0]["input_ref"].startswith("trace")
    assert {r["trace_id"] for r in rows} == {"good"}  # one bad trace never costs another
    assert counters.as_dict()["dropped"] == {error_type: 1}


def test_a_truncated_trace_gives_trajectories_ending_in_exit_never():
    code = "def f(n):\n    t = 0\n    while True:\n        t += n\n"
    row = trace_row(code, "f", "1", trace_id="loop", max_events=30)
    assert row["exit"] == "never" and row["truncated"]
    rows, failures, _ = _stage([row], per_trace=6)
    assert failures == []
    forward = [r for r in rows if r["direction"] == "forward"]
    assert {r["exit"] for r in forward} <= {"never", "cut"}
    assert any(r["text"].endswith("<|exit_never|><|trace_end|>") for r in forward)


def test_a_program_that_raises_at_once_gives_trajectories_ending_in_exit_error():
    row = trace_row("def f(x):\n    raise ValueError(x)\n", "f", "1", trace_id="raise")
    assert [e["event"] for e in row["events"]] == ["call", "line", "exception"]
    rows, failures, _ = _stage([row], per_trace=3)
    assert failures == []
    assert {r["exit"] for r in rows if r["direction"] == "forward"} == {"error"}
    assert {r["exit"] for r in rows if r["direction"] == "inverse"} == {"entry"}
    for r in rows:
        parse(r["text"])


def test_a_single_call_event_trace_is_walkable():
    row = {"trace_id": "one", "source_id": "s", "exit": "never", "code": "def f():\n    pass\n",
           "events": [{"event": "call", "frame_id": 0, "source": "def f():", "locals": [], "arg": None}]}
    rows, failures, _ = _stage([row])
    assert failures == [] and rows
    assert all(r["exit"] in ("never", "entry") for r in rows)


def test_deep_recursion_and_long_traces_do_not_hit_the_recursion_limit():
    depth = 5000
    events = []
    for level in range(depth):
        events.append({"event": "call", "frame_id": level, "source": "def f(n):", "locals": [("n", str(level))],
                       "arg": None})
        events.append({"event": "line", "frame_id": level, "source": "    return f(n - 1)",
                       "locals": [("n", str(level))], "arg": None})
    for level in reversed(range(depth)):
        events.append({"event": "return", "frame_id": level, "source": "    return f(n - 1)",
                       "locals": [("n", str(level))], "arg": "0"})
    trace = Trace.from_row({"trace_id": "deep", "exit": "normal", "events": events, "code": ""})
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    assert len(inv.kind) == len(events) + (depth - 1) + 1  # every line but the deepest made a call
    assert sample_trajectories(trace, PolicyConfig(), 0, 2)


def test_special_tokens_inside_code_and_values_survive():
    code = 'def f(s):\n    t = s + "<|frame_sep|>"\n    return t\n'
    row = trace_row(code, "f", "'<|trace_end|>'", trace_id="tokens")
    rows, failures, _ = _stage([row], per_trace=3)
    assert failures == []
    for r in rows:
        episode = parse(r["text"])
        assert episode.code == code


def test_repository_traces_start_at_a_sampled_call():
    row = synthetic_row(11, repo=True)
    trace = Trace.from_row(row)
    calls = {i for i, kind in enumerate(trace.kinds) if kind == "call"}
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    starts = {t.nodes[0] for t in sample_trajectories(trace, PolicyConfig(), 5, 30) if t.direction == "forward"}
    assert starts <= calls and len(starts) > 1
    inverse_starts = {t.nodes[0] for t in sample_trajectories(trace, PolicyConfig(), 5, 30)
                      if t.direction == "inverse"}
    assert all(inv.kind[k] in ("inv_return", "inv_exception") or k == 0 for k in inverse_starts)
    function_row = dict(row, source_kind="function")
    assert {t.nodes[0] for t in sample_trajectories(function_row, PolicyConfig(), 5, 10)} == {0}


def test_breakpoints_target_both_lines_that_come_again_and_lines_that_do_not():
    trace = Trace.from_row(trace_row(WORKED_EXAMPLE, "f", "3", trace_id="w"))
    config = PolicyConfig(forward_mixture=((1.0, (("breakpoint", 1.0),)),), directions=("forward",))
    hits = misses = 0
    for trajectory in sample_trajectories(trace, config, 1, 200):
        for action, landing in zip(trajectory.actions, trajectory.nodes[1:]):
            if landing == len(trace):
                misses += 1
            else:
                hits += 1
                assert trace.sources[landing] == action.target
    assert hits > 50 and misses > 20


def test_the_action_mix_follows_the_default_mixture():
    from collections import Counter

    trace = Trace.from_row(synthetic_row(2, max_events=400))
    mix = Counter()
    for trajectory in sample_trajectories(trace, PolicyConfig(directions=("forward",)), 0, 300):
        mix.update(action.name for action in trajectory.actions)
    total = sum(mix.values())
    # default: into .425, over .40, return .10, breakpoint .05, continue .025 (per-trajectory components
    # make short trajectories favour continue-free walks, so only rough bounds)
    assert 0.3 < mix["step_into"] / total < 0.55 and 0.3 < mix["step_over"] / total < 0.55
    assert mix["step_return"] and mix["breakpoint"] and mix["continue"]


def test_the_report_shows_the_mix_lengths_histogram_and_one_example_per_direction():
    from pipeline.debugger.report import trajectory_report

    rows, _, _ = _stage([trace_row(WORKED_EXAMPLE, "f", "3", trace_id="w"), synthetic_row(4)], per_trace=3)
    text = "\n".join(trajectory_report(rows))
    assert "action mix: " in text and "token-length histogram" in text and "states per trajectory" in text
    assert "example forward trajectory" in text and "example inverse trajectory" in text
    assert "<|exit_normal|>" in text and "<|inv_exit_entry|>" in text
    assert trajectory_report([]) == ["trajectories: none"]
