"""The trajectories stage: rows that match the schema, failures for bad traces, never a crash."""

import pyarrow as pa
import pytest
from debugger_helpers import WORKED_EXAMPLE, synthetic_row, trace_row

from pipeline.debugger import parse
from pipeline.stages.trajectories import SamplingSettings, sample_trajectories_stage
from schemas import schema_of
from schemas import trajectories as trajectories_schema


def _stage(rows, per_trace=2, seed=7):
    """(trajectories rows, failures rows, the `trajectories` counters) of the stage."""
    output = sample_trajectories_stage(rows, SamplingSettings(seed=seed, per_trace=per_trace), "unit-0")
    assert set(output.tables) == {"trajectories", "failures"} and set(output.counters) == {"trajectories"}
    return output.rows("trajectories"), output.rows("failures"), output.counters["trajectories"]


def _arrow_round_trip(row: dict) -> dict:
    """The row as `traces` shards give it back (locals as a list of pairs)."""
    from schemas import traces

    full = {
        "python_version": "3.11",
        "tracer_version": "1",
        "qualname": "f",
        "input": "",
        "repo_url": None,
        "commit": None,
        "path": None,
        "truncation_reason": None,
        **row,
    }
    for event in full["events"]:
        event.setdefault("parent_frame_id", None)
    return pa.Table.from_pylist([full], schema=traces.SCHEMA).to_pylist()[0]


def test_rows_match_the_schema_and_are_deterministic():
    rows_in = [
        _arrow_round_trip(trace_row(WORKED_EXAMPLE, "f", "3", trace_id="w")),
        _arrow_round_trip(synthetic_row(3)),
    ]
    rows, failures, counters = _stage(rows_in)
    assert failures == []
    table = pa.Table.from_pylist(rows, schema=trajectories_schema.SCHEMA)
    assert table.num_rows == len(rows) == 2 * 2 * 2
    assert schema_of("trajectories") is trajectories_schema.SCHEMA
    assert [(r["trace_id"], r["direction"], r["sample_index"]) for r in rows] == [
        (t, d, i) for t in ("w", "synthetic-3") for d in ("forward", "inverse") for i in range(2)
    ]
    for row in rows:
        assert row["n_tokens"] == len(row["text"].encode())
        assert len(row["states"]) == len(row["actions"]) + 1
        episode = parse(row["text"])
        assert len(episode.states) == len(row["states"])
        assert row["exit"] in (
            {"normal", "error", "never", "cut"} if row["direction"] == "forward" else {"entry", "cut"}
        )
    assert len({r["trajectory_id"] for r in rows}) == len(rows)
    assert _stage(rows_in)[0] == rows
    assert counters.as_dict()["in"] == 2 and counters.as_dict()["out"] == 8


def test_every_field_is_documented():
    from schemas.fields import doc_of

    assert all(doc_of(field) for field in trajectories_schema.SCHEMA)


BAD_ROWS = [
    ({"trace_id": "empty", "source_id": "s", "exit": "normal", "events": []}, "EmptyTrace"),
    ({"trace_id": "noexit", "source_id": "s", "events": []}, "MalformedTrace"),
    (
        {
            "trace_id": "exc-only",
            "source_id": "s",
            "exit": "error",
            "events": [{"event": "exception", "frame_id": 0, "source": "x", "locals": [], "arg": "E()"}],
        },
        "MalformedTrace",
    ),
    (
        {
            "trace_id": "orphan",
            "source_id": "s",
            "exit": "normal",
            "events": [
                {"event": "call", "frame_id": 0, "source": "def f():", "locals": [], "arg": None},
                {"event": "line", "frame_id": 5, "source": "x", "locals": [], "arg": None},
            ],
        },
        "MalformedTrace",
    ),
    (
        {
            "trace_id": "kind",
            "source_id": "s",
            "exit": "normal",
            "events": [{"event": "jump", "frame_id": 0, "source": "", "locals": [], "arg": None}],
        },
        "MalformedTrace",
    ),
    (
        {
            "trace_id": "locals",
            "source_id": "s",
            "exit": "normal",
            "events": [{"event": "call", "frame_id": 0, "source": "", "locals": 5, "arg": None}],
        },
        "MalformedTrace",
    ),
    (
        {
            "trace_id": "dots",
            "source_id": "s",
            "exit": "normal",
            "events": [
                {"event": "call", "frame_id": 0, "source": "", "locals": [("..", "1")], "arg": None},
                {"event": "return", "frame_id": 0, "source": "", "locals": [], "arg": "1"},
            ],
        },
        "MalformedTrace",
    ),
    (
        {
            "trace_id": "arg",
            "source_id": "s",
            "exit": "normal",
            "events": [
                {"event": "call", "frame_id": 0, "source": "", "locals": [], "arg": None},
                {"event": "return", "frame_id": 0, "source": "", "locals": [], "arg": 7},
            ],
        },
        "MalformedTrace",
    ),
    ("not a row", "MalformedTrace"),
]


@pytest.mark.parametrize(
    "row,error_type", BAD_ROWS, ids=[str(r[0])[:30] if isinstance(r[0], str) else r[0]["trace_id"] for r in BAD_ROWS]
)
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
    row = {
        "trace_id": "one",
        "source_id": "s",
        "exit": "never",
        "code": "def f():\n    pass\n",
        "events": [{"event": "call", "frame_id": 0, "source": "def f():", "locals": [], "arg": None}],
    }
    rows, failures, _ = _stage([row])
    assert failures == [] and rows
    assert all(r["exit"] in ("never", "entry") for r in rows)


def test_special_tokens_inside_code_and_values_survive():
    code = 'def f(s):\n    t = s + "<|frame_sep|>"\n    return t\n'
    row = trace_row(code, "f", "'<|trace_end|>'", trace_id="tokens")
    rows, failures, _ = _stage([row], per_trace=3)
    assert failures == []
    for r in rows:
        episode = parse(r["text"])
        assert episode.code == code


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"per_trace": 0}, "per_trace"),
        ({"per_trace": 1.5}, "per_trace"),
        ({"seed": "7"}, "seed must be an int"),
    ],
)
def test_sampling_settings_are_validated_up_front(settings, words):
    with pytest.raises(ValueError, match=words):
        SamplingSettings(**settings)
