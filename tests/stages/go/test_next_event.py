"""The next-event distributions as pure functions: the four prefix keys, n, censoring, End, run ends, entropy."""

import hashlib
import json
import math

import pyarrow as pa
import pytest

from pipeline.goscheduler.events import state_after
from pipeline.stages.go.next_event import (
    entropy_bits,
    exact_prefix_rows,
    global_rows,
    goroutine_exact_rows,
    goroutine_rows,
    next_event_rows,
)
from schemas import schema_of
from schemas.go_next_event import OUTCOMES


def ev(goroutine: int, event: str, reason: str = "", line: int = 1) -> dict:
    return {
        "goroutine": goroutine,
        "gpath": "0" if goroutine == 0 else f"0.{goroutine}",
        "event": event,
        "reason": reason,
        "function": "main.main",
        "file": "main.go",
        "line": line,
    }


def run(index: int, events: list[dict], complete: bool = True, status: str | None = None) -> dict:
    return {
        "run_index": index,
        "complete": complete,
        "status": status or ("ok" if complete else "timeout"),
        "events": [dict(e, index=i) for i, e in enumerate(events)],
    }


A = [ev(0, "GoCreate"), ev(0, "GoBlock", "chan receive"), ev(1, "GoStart"), ev(1, "GoEnd")]
B = [ev(0, "GoCreate"), ev(1, "GoStart"), ev(1, "GoEnd"), ev(0, "GoSched", "runtime.Gosched")]


def by_depth(rows):
    return {row["depth"]: row for row in rows}


def test_identical_runs_have_zero_entropy_under_every_key():
    runs = [run(i, A) for i in range(4)]
    output = next_event_rows("p", runs)
    rows, counters = output.rows("go_next_event"), output.counters["go_next_event"]
    assert set(output.tables) == {"go_next_event"}
    assert rows and all(row["entropy"] == 0.0 for row in rows)
    assert {row["prefix_kind"] for row in rows} == {"global", "goroutine", "goroutine_exact", "exact"}
    assert all(sum(row["ends"].values()) == row["n"] == row["ends"]["ok"] for row in rows)
    assert counters.n_in == 4 and counters.n_out == len(rows)


def test_global_rows_cover_every_depth_and_end_with_end():
    rows = by_depth(global_rows("p", [run(0, A), run(1, B)]))
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert rows[0]["counts"]["GoCreate"] == 2 and rows[0]["entropy"] == 0.0
    assert rows[1]["counts"]["GoBlock"] == 1 and rows[1]["counts"]["GoStart"] == 1
    assert rows[1]["entropy"] == pytest.approx(1.0)
    assert rows[4]["counts"]["End"] == 2 and rows[4]["probs"]["End"] == 1.0
    for row in rows.values():
        assert sum(row["counts"].values()) == row["n"] == len(row["runs"])
        assert math.isclose(sum(row["probs"].values()), 1.0)


def test_incomplete_runs_are_censored_not_ended():
    runs = [run(0, A), run(1, A[:2], complete=False)]
    rows = by_depth(global_rows("p", runs))
    assert rows[1]["n"] == 2 and rows[1]["runs"] == [0, 1]
    assert rows[2]["n"] == 1 and rows[2]["runs"] == [0]  # run 1 is unknown past its last event
    assert rows[4]["counts"]["End"] == 1
    assert all(row["counts"]["End"] == 0 for depth, row in rows.items() if depth < 4)


def test_a_run_with_no_known_event_counts_nowhere():
    rows = global_rows("p", [run(0, [], complete=False)])
    assert rows == []
    [row] = global_rows("p", [run(0, [], complete=True)])
    assert row["depth"] == 0 and row["counts"]["End"] == 1


def test_per_goroutine_key_counts_each_goroutine_own_sequence():
    rows = goroutine_rows("p", [run(0, A), run(1, B)])
    main = by_depth([r for r in rows if r["goroutine"] == 0])
    child = by_depth([r for r in rows if r["goroutine"] == 1])
    assert main[1]["counts"]["GoBlock"] == 1 and main[1]["counts"]["GoSched"] == 1
    assert main[2]["counts"]["End"] == 2
    assert [child[d]["entropy"] for d in sorted(child)] == [0.0, 0.0, 0.0]  # GoStart, GoEnd, End in both runs
    assert all(r["gpath"] == ("0" if r["goroutine"] == 0 else "0.1") for r in rows)


def test_per_goroutine_key_skips_runs_without_the_goroutine():
    rows = goroutine_rows("p", [run(0, A), run(1, [ev(0, "GoSched", "runtime.Gosched")])])
    child = [r for r in rows if r["goroutine"] == 1]
    assert child and all(r["runs"] == [0] for r in child)


def test_leaked_goroutine_never_unblocks_after_its_block():
    leak = [ev(0, "GoCreate"), ev(1, "GoStart"), ev(1, "GoBlock", "select"), ev(0, "GoSched", "preempted")]
    rows = goroutine_rows("p", [run(i, leak) for i in range(3)])
    child = by_depth([r for r in rows if r["goroutine"] == 1])
    assert child[1]["detail_counts"] == [("GoBlock(select)", 3)]
    assert all(child[d]["probs"]["GoUnblock"] == 0.0 for d in child if d > 1)
    assert child[2]["probs"]["End"] == 1.0 and max(child) == 2


LEAK = [ev(0, "GoCreate"), ev(1, "GoStart"), ev(1, "GoBlock", "select"), ev(0, "GoEnd")]
FREED = [
    ev(0, "GoCreate"),
    ev(1, "GoStart"),
    ev(1, "GoBlock", "select"),
    ev(1, "GoUnblock"),
    ev(1, "GoEnd"),
    ev(0, "GoEnd"),
]


def blocked_on_select(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["goroutine"] == 1 and r["state"] == "blocked(select)"]


def test_goroutine_exact_rows_carry_the_state_the_history_leaves_the_goroutine_in():
    rows = goroutine_exact_rows("p", [run(i, FREED) for i in range(2)])
    states = [(r["goroutine"], r["depth"], r["state"]) for r in rows if r["goroutine"] == 1]
    assert states == [
        (1, 0, "not_created"),
        (1, 1, "running"),
        (1, 2, "blocked(select)"),
        (1, 3, "runnable"),
        (1, 4, "ended"),
    ]


def test_the_leak_signature_is_a_query_over_the_table():
    """Leaked in every run on a select nothing can satisfy: P(GoUnblock) = 0, and every run ended as a leak."""
    rows = goroutine_exact_rows("p", [run(i, LEAK, status="leak") for i in range(3)])
    [blocked] = blocked_on_select(rows)
    assert blocked["counts"]["GoUnblock"] == 0 and blocked["probs"]["End"] == 1.0
    assert blocked["ends"]["leak"] == blocked["n"] == 3


def test_a_select_whose_fate_depends_on_the_schedule_has_both_futures():
    runs = [run(0, LEAK, status="leak"), run(1, FREED), run(2, LEAK, status="leak"), run(3, FREED)]
    [blocked] = blocked_on_select(goroutine_exact_rows("p", runs))
    assert blocked["counts"]["GoUnblock"] == 2 and blocked["counts"]["End"] == 2
    assert blocked["ends"] == {"ok": 2, "leak": 2, "deadlock": 0, "timeout": 0, "other": 0}
    assert blocked["entropy"] == pytest.approx(1.0)


def test_exact_prefix_rows_split_where_runs_diverge():
    runs = [run(0, A), run(1, A), run(2, B)]
    rows = exact_prefix_rows("p", runs, min_prefix_runs=2)
    depth1 = [r for r in rows if r["depth"] == 1]
    assert len(depth1) == 1 and depth1[0]["n"] == 3 and depth1[0]["entropy"] > 0
    # After the split only runs 0 and 1 share a prefix; run 2 alone gets no rows.
    assert all(r["runs"] == [0, 1] for r in rows if r["depth"] >= 2)
    assert max(r["depth"] for r in rows) == 4
    with_singletons = exact_prefix_rows("p", runs, min_prefix_runs=1)
    assert any(r["runs"] == [2] for r in with_singletons)


def test_exact_prefix_hash_is_the_documented_chain():
    rows = exact_prefix_rows("p", [run(0, A), run(1, A)])
    digest = hashlib.sha256(b"").digest()
    for depth in range(len(A) + 1):
        [row] = [r for r in rows if r["depth"] == depth]
        assert row["prefix_hash"] == digest.hex()
        if depth < len(A):
            e = A[depth]
            token = [e["goroutine"], e["event"], e["reason"], e["function"], e["file"], e["line"]]
            digest = hashlib.sha256(digest + json.dumps(token, separators=(",", ":")).encode()).digest()


def test_exact_prefix_distinguishes_source_lines():
    runs = [run(0, [ev(0, "GoSched", line=3)]), run(1, [ev(0, "GoSched", line=4)])]
    rows = exact_prefix_rows("p", runs)
    assert [r["depth"] for r in rows] == [0]  # same event type, different line: the prefixes differ


def test_rows_fit_the_schema_and_order_is_deterministic():
    runs = [run(0, A), run(1, B), run(2, A[:3], complete=False)]
    rows = next_event_rows("p", runs).rows("go_next_event")
    table = pa.Table.from_pylist(rows, schema=schema_of("go_next_event"))
    assert table.num_rows == len(rows)
    again = next_event_rows("p", list(reversed(runs))).rows("go_next_event")
    assert again == rows
    assert set(rows[0]["counts"]) == set(OUTCOMES)


def test_build_error_rows_are_ignored():
    output = next_event_rows("p", [{"run_index": -1, "complete": False, "status": "build_error", "events": []}])
    assert output.rows("go_next_event") == [] and output.counters["go_next_event"].dropped == {"build_error": 1}


def test_entropy_bits():
    assert entropy_bits([5]) == 0.0
    assert entropy_bits([1, 1]) == pytest.approx(1.0)
    assert entropy_bits([1, 1, 1, 1]) == pytest.approx(2.0)
    assert entropy_bits([]) == 0.0


def test_a_block_on_a_known_object_names_it_in_the_state_and_object_ops_are_no_depth():
    blocked = ev(0, "GoBlock", "chan send") | {"object": "chan@main.go:4", "object_state": "send, len 2/2, receivers 0"}
    assert state_after([ev(0, "GoCreate"), blocked]) == "blocked(chan send: chan@main.go:4 send, len 2/2, receivers 0)"
    assert state_after([ev(0, "GoBlock", "select")]) == "blocked(select)"  # not rewritten: no object
    assert state_after([ev(0, "GoBlock", "chan receive") | {"object": "", "object_state": "recv, nil channel"}]) == (
        "blocked(chan receive: recv, nil channel)"
    )
    op = ev(0, "ObjectOp", "send") | {"object": "chan@main.go:4", "object_state": "len 1/2"}
    rows = next_event_rows("p", [run(0, [ev(0, "GoCreate"), op, op, blocked])]).rows("go_next_event")
    assert [row["depth"] for row in rows if row["prefix_kind"] == "global"] == [0, 1, 2]
