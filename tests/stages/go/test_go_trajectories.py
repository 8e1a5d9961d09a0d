"""The go_trajectories windows as pure functions: exact counts at every step (n = 1 included), identical windows
kept once with every run they came from, End for complete runs, censoring for incomplete ones."""

import pyarrow as pa
import pytest
from test_next_event import ev, run

from pipeline.stages.go.next_event import ROOT_HASH, exact_prefix_rows, next_hash
from pipeline.stages.go.trajectories import go_trajectory_rows, trajectory_rows
from schemas import schema_of
from schemas.go_next_event import OUTCOMES

A = [ev(0, "GoCreate"), ev(1, "GoStart"), ev(1, "GoBlock", "chan receive"), ev(0, "GoUnblock"), ev(1, "GoEnd")]
B = [ev(0, "GoCreate"), ev(1, "GoStart"), ev(1, "GoEnd"), ev(0, "GoSched", "runtime.Gosched")]


def counts(**nonzero) -> dict:
    return {name: nonzero.get(name, 0) for name in OUTCOMES}


def steps(row) -> list[tuple[str, int, dict]]:
    return [(step["event"], step["n"], step["counts"]) for step in row["steps"]]


def test_every_step_counts_the_runs_sharing_its_prefix_down_to_one_run():
    runs = [run(0, A), run(1, A), run(2, B)]
    rows = trajectory_rows("p", runs, window=8, stride=8)
    assert [(row["depth"], row["runs"], row["n_steps"], row["ends"]) for row in rows] == [
        (0, [0, 1], 6, True),
        (0, [2], 5, True),
    ]
    assert steps(rows[0]) == [
        ("GoCreate", 3, counts(GoCreate=3)),
        ("GoStart", 3, counts(GoStart=3)),
        ("GoBlock", 3, counts(GoBlock=2, GoEnd=1)),
        ("GoUnblock", 2, counts(GoUnblock=2)),
        ("GoEnd", 2, counts(GoEnd=2)),
        ("End", 2, counts(End=2)),
    ]
    assert steps(rows[1])[2:] == [
        ("GoEnd", 3, counts(GoBlock=2, GoEnd=1)),
        ("GoSched", 1, counts(GoSched=1)),  # B's own prefix: n = 1
        ("End", 1, counts(End=1)),
    ]
    assert rows[0]["steps"][2]["entropy"] == pytest.approx(0.9183, abs=1e-4)
    end = rows[0]["steps"][-1]
    assert end["goroutine"] is None and end["function"] == "" and end["line"] == 0
    assert rows[0]["steps"][2]["reason"] == "chan receive" and rows[0]["steps"][2]["goroutine"] == 1


def test_steps_agree_with_the_exact_key_where_it_has_rows():
    runs = [run(0, A), run(1, A), run(2, B), run(3, B)]
    exact = {(row["depth"], row["prefix_hash"]): row for row in exact_prefix_rows("p", runs)}
    for row in trajectory_rows("p", runs, window=3, stride=1):
        digest = bytes.fromhex(row["prefix_hash"])
        events = next(r["events"] for r in runs if r["run_index"] == row["runs"][0])
        for i, step in enumerate(row["steps"]):
            match = exact[(row["depth"] + i, digest.hex())]
            assert (step["n"], step["counts"]) == (match["n"], match["counts"])
            if row["depth"] + i < len(events):
                digest = next_hash(digest, events[row["depth"] + i])


def test_windows_follow_the_stride_and_hash_their_prefix_and_events():
    rows = trajectory_rows("p", [run(0, A)], window=2, stride=2)
    assert [(row["depth"], [s["event"] for s in row["steps"]]) for row in rows] == [
        (0, ["GoCreate", "GoStart"]),
        (2, ["GoBlock", "GoUnblock"]),
        (4, ["GoEnd", "End"]),
    ]
    digest = ROOT_HASH
    for event in A[:2]:
        digest = next_hash(digest, event)
    assert rows[1]["prefix_hash"] == rows[0]["window_hash"] == digest.hex()
    overlapping = trajectory_rows("p", [run(0, A)], window=4, stride=2)
    assert [(row["depth"], row["n_steps"]) for row in overlapping] == [(0, 4), (2, 4), (4, 2)]
    assert trajectory_rows("p", [run(0, A[:4])], window=2, stride=2)[-1]["steps"][-1]["event"] == "End"
    only_end = trajectory_rows("p", [run(0, A[:4])], window=2, stride=4)
    assert [(row["depth"], row["ends"], row["n_steps"]) for row in only_end] == [(0, False, 2), (4, True, 1)]


def test_incomplete_runs_are_censored_never_ended():
    runs = [run(0, A), run(1, A[:3], complete=False)]
    rows = trajectory_rows("p", runs, window=8, stride=8)
    assert [(row["runs"], row["ends"], row["n_steps"]) for row in rows] == [([0], True, 6), ([1], False, 3)]
    assert [step["n"] for step in rows[0]["steps"]] == [2, 2, 2, 1, 1, 1]  # run 1 unknown past its event 2
    assert all(step["counts"]["End"] == 0 for step in rows[1]["steps"])


def test_identical_runs_give_one_window_each_and_windows_of_diverging_runs_split():
    runs = [run(i, A) for i in range(5)] + [run(5, B)]
    rows = trajectory_rows("p", runs, window=2, stride=2)
    assert [(row["depth"], row["runs"]) for row in rows] == [
        (0, [0, 1, 2, 3, 4, 5]),  # the same first two events in every run
        (2, [0, 1, 2, 3, 4]),
        (2, [5]),
        (4, [0, 1, 2, 3, 4]),
        (4, [5]),
    ]


def test_the_stage_skips_build_errors_and_rows_fit_the_schema():
    build_error = {"run_index": -1, "complete": False, "status": "build_error", "events": []}
    output = go_trajectory_rows("p", [run(1, B), build_error, run(0, A)], window=4, stride=4)
    rows = output.rows("go_trajectories")
    assert output.counters["go_trajectories"].n_in == 2 and output.counters["go_trajectories"].n_out == len(rows)
    assert rows[0]["runs"] == [0] and rows[0]["program_id"] == "p"
    pa.Table.from_pylist(rows, schema=schema_of("go_trajectories"))
    with pytest.raises(ValueError, match="window"):
        trajectory_rows("p", [run(0, A)], window=0)
