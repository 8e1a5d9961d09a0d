"""The harness's rewriting names the objects goroutines wait on (go_runs `object`, `object_state`, ObjectOp
events, `instrumentation`), with ids stable across runs and frames unchanged; a program it cannot rewrite
falls back to its original source, marked, and is no failure."""

from go_helpers import requires_bwrap, requires_go, trace

pytestmark = [requires_go, requires_bwrap]

FILLED = ("GoBlock", "chan send", "chan@main.go:14", "send, len 2/2, receivers 0")
CONTENDED = ("GoBlock", "sync", "mutex@main.go:29", "lock, held by g0")
SELECT = (
    "GoBlock",
    "select",
    "chan@main.go:45,chan@main.go:46",
    "select: recv chan@main.go:45 len 0/0, recv chan@main.go:46 len 0/1",
)


def named(run: dict) -> list[tuple]:
    return [(e["event"], e["reason"], e["object"], e["object_state"]) for e in run["events"] if e["object"]]


def frames(run: dict, event: str) -> set[tuple]:
    return {(e["reason"], e["function"], e["file"], e["line"]) for e in run["events"] if e["event"] == event}


def test_blocked_goroutines_name_their_objects_in_every_run(examples, go_tools):
    traced, distributions = trace(examples["object_states"], go_tools, runs=3, timeout_s=5.0)
    runs = traced.rows("go_runs")
    assert not traced.rows("failures")
    ids = []
    for run in runs:
        assert (run["status"], run["instrumentation"], run["rewrite_error"]) == ("ok", "rewritten", None)
        events = named(run)
        assert FILLED in events and SELECT in events
        assert events.count(CONTENDED) == 3  # three goroutines wait for main's lock
        assert ("ObjectOp", "make", "chan@main.go:14", "len 0/2") in events
        assert ("ObjectOp", "done", "wg@main.go:31", "counter 0") in events
        assert ("ObjectOp", "select", "chan@main.go:46", "recv, len 0/1") in events
        assert all(e["event"] in ("ObjectOp", "GoBlock", "GoUnblock") for e in run["events"] if e["object_state"])
        assert all(e["file"] == "main.go" for e in run["events"] if e["event"] == "ObjectOp")
        assert not any(e["event"] == "UserLog" for e in run["events"])  # the harness's logs are not the program's
        ids.append(sorted({e["object"] for e in run["events"] if e["object"]}))
    assert ids[0] == ids[1] == ids[2]
    states = {row["state"] for row in distributions if row["prefix_kind"] == "goroutine_exact"}
    assert "blocked(chan send: chan@main.go:14 send, len 2/2, receivers 0)" in states
    assert all("ObjectOp" not in name for row in distributions for name in row["detail_counts"])


def test_rewriting_keeps_the_reported_frames(examples, go_tools):
    rewritten, _ = trace(examples["object_states"], go_tools, runs=2, timeout_s=5.0)
    plain, _ = trace(examples["object_states"], go_tools, runs=2, timeout_s=5.0, rewrite=False)
    plain_runs = plain.rows("go_runs")
    assert {run["instrumentation"] for run in plain_runs} == {"disabled"}
    assert not any(
        e["event"] == "ObjectOp" or e["object"] or e["object_state"] for r in plain_runs for e in r["events"]
    )
    for event in ("GoCreate", "GoBlock"):
        assert set().union(*(frames(r, event) for r in rewritten.rows("go_runs"))) == set().union(
            *(frames(r, event) for r in plain_runs)
        )


def test_a_program_that_fails_to_build_rewritten_falls_back(examples, go_tools):
    traced, _ = trace(examples["rewrite_fallback"], go_tools, runs=2)
    assert not traced.rows("failures")
    for run in traced.rows("go_runs"):
        assert (run["status"], run["instrumentation"]) == ("ok", "fallback")
        assert "_tracegenSend redeclared" in run["rewrite_error"]
        assert not any(e["object"] for e in run["events"])
