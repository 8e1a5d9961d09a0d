"""The program's own runtime/trace annotations (trace.Log, regions) are kept as their own events, for the
program's goroutines only, and go_next_event still counts scheduler events only."""

from go_helpers import requires_bwrap, requires_go, trace

from schemas.go_runs import ANNOTATIONS

pytestmark = [requires_go, requires_bwrap]


def test_logs_and_regions_are_events_with_their_text(examples, go_tools):
    traced, distributions = trace(examples["user_annotations"], go_tools, runs=2)
    for run in traced.rows("go_runs"):
        assert run["status"] == "ok"
        logs = [(e["gpath"], e["category"], e["message"]) for e in run["events"] if e["event"] == "UserLog"]
        assert ("0", "main", "waiting for 2 results") in logs
        assert sorted(m for g, c, m in logs if c == "worker") == ["start 1", "start 2"]
        assert all(g.startswith("0.") for g, c, _ in logs if c == "worker")
        regions = [(e["reason"], e["message"], e["function"]) for e in run["events"] if e["event"] == "UserRegion"]
        assert sorted(regions) == [("begin", "square", "main.work")] * 2 + [("end", "square", "main.work")] * 2
        assert all(e["category"] == e["message"] == "" for e in run["events"] if e["event"] not in ANNOTATIONS)
    runs = {run["run_index"]: run for run in traced.rows("go_runs")}
    global_rows = [row for row in distributions if row["prefix_kind"] == "global"]
    scheduler = {i: sum(e["event"] not in ANNOTATIONS for e in run["events"]) for i, run in runs.items()}
    # One row per depth up to the longest run, End included: annotations are not depths.
    assert len(global_rows) == max(scheduler.values()) + 1
    assert all(not (set(row["detail_counts"]) & set(ANNOTATIONS)) for row in distributions)
