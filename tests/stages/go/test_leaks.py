"""Leaks, incomplete runs and runtime-started goroutines, on real programs written for this project: what the
tables say must match what the runs did, so the seed's leak signature is a query over go_next_event."""

import re
import shutil

from go_helpers import EXAMPLES, requires_bwrap, requires_go, trace

from pipeline.engine.job import run_job
from pipeline.inspect import summarize
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.stages.go.runs import GoSettings

pytestmark = [requires_go, requires_bwrap]


def blocked_on_select(rows: list[dict], gpath: str) -> list[dict]:
    return [
        r
        for r in rows
        if r["prefix_kind"] == "goroutine_exact" and r["gpath"] == gpath and r["state"].startswith("blocked(select")
    ]


def test_a_goroutine_left_blocked_on_an_unsatisfiable_select_is_a_leak(examples, go_tools):
    traced, rows = trace(examples["leak_unsatisfiable_select"], go_tools, runs=4, timeout_s=5.0)
    runs = traced.rows("go_runs")
    assert [run["status"] for run in runs] == ["leak"] * 4
    assert all(run["complete"] and run["generations"] >= 1 for run in runs)
    [gpath] = {g["gpath"] for run in runs for g in run["leaked"]}
    assert all([(g["gpath"], g["reason"]) for g in run["leaked"]] == [(gpath, "select")] for run in runs)
    blocked = blocked_on_select(rows, gpath)
    assert blocked, "the leaked goroutine's history up to its GoBlock(select) is shared by the runs"
    for row in blocked:  # the seed's claim: once blocked there, it never unblocks
        assert row["counts"]["GoUnblock"] == 0 and row["probs"]["End"] == 1.0
        assert row["ends"]["leak"] == row["n"] == 4


def test_a_select_whose_fate_depends_on_the_schedule_is_counted_by_how_each_run_ended(examples, go_tools):
    traced, rows = trace(examples["select_schedule_dependent"], go_tools, runs=12, timeout_s=5.0, gomaxprocs=(1, 2, 4))
    runs = traced.rows("go_runs")
    assert {run["status"] for run in runs} <= {"ok", "leak"}
    leaked = {run["run_index"]: {g["gpath"] for g in run["leaked"] if g["reason"] == "select"} for run in runs}
    gpaths = {g for gpaths in leaked.values() for g in gpaths}
    blocked = [row for gpath in gpaths for row in blocked_on_select(rows, gpath)]
    # The runtime's uniform select picks the outcome, not the timing: 21 of 48 runs leaked on a quiet machine,
    # 24 of 48 with three busy loops beside it; all 12 alike would happen about once in 2000.
    assert sum(r["counts"]["End"] for r in blocked) > 0 and sum(r["counts"]["GoUnblock"] for r in blocked) > 0
    for gpath in gpaths:
        for row in blocked_on_select(rows, gpath):
            # End exactly in the runs where it stayed blocked (leaks), GoUnblock in the others.
            ended = {r for r in row["runs"] if gpath in leaked[r]}
            assert row["counts"]["End"] == len(ended) == row["ends"]["leak"]
            assert row["counts"]["GoUnblock"] == row["n"] - len(ended)


def test_a_leak_in_a_test_the_test_does_not_wait_for(examples, go_tools):
    traced, _ = trace(examples["leak_in_test"], go_tools, runs=2, timeout_s=5.0)
    runs = traced.rows("go_runs")
    assert [run["status"] for run in runs] == ["leak", "leak"]
    assert all(run["leaked"] and all(g["state"] == f"blocked({g['reason']})" for g in run["leaked"]) for run in runs)


def test_a_goroutine_alive_at_the_end_is_a_leak_whatever_its_state(examples, go_tools):
    states, starts = {}, {}
    for name, runs in (("leak_never_started", 6), ("leak_busy_loop", 3), ("leak_sleeping", 3)):
        traced, _ = trace(examples[name], go_tools, runs=runs, timeout_s=5.0, gomaxprocs=(1, 2, 4))
        rows = traced.rows("go_runs")
        assert [run["status"] for run in rows] == ["leak"] * runs, name
        states[name] = [{(g["gpath"], g["state"], g["reason"]) for g in run["leaked"]} for run in rows]
        starts[name] = {g["gpath"]: g["start_function"] for run in rows for g in run["goroutines"]}
    # Queued last behind 400 ms of work when the test binary stops its trace: in most runs (about 4 in 5 on a
    # busy 2-core machine) the notifier has never started.
    never_ran = set()
    for leaked in states["leak_never_started"]:
        assert {state for _, state, _ in leaked} <= {"created", "runnable", "blocked(chan receive)"}
        never_ran |= {starts["leak_never_started"][g] for g, state, _ in leaked if state == "created"}
    assert "prog.Notify" in never_ran
    assert all(len(s) == 1 and s <= {("0.1", "running", ""), ("0.1", "runnable", "")} for s in states["leak_busy_loop"])
    assert states["leak_sleeping"] == [{("0.1", "blocked(sleep)", "sleep")}] * 3


def test_goroutines_about_to_end_when_main_returns_end_in_the_grace(examples, go_tools):
    for name in ("pingpong_unbuffered", "init_goroutine", "select_default"):
        traced, _ = trace(examples[name], go_tools, runs=3, timeout_s=5.0, gomaxprocs=(1, 2, 4))
        for run in traced.rows("go_runs"):
            assert run["status"] == "ok", (name, run["leaked"])
            # Every goroutine ended in the trace; main waited for that on a channel (no program frame).
            assert all(g["final_state"] == "NotExist" for g in run["goroutines"] if g["gpath"] != "0")


def test_an_afterfunc_callback_is_kept_with_the_same_goroutine_in_every_run(examples, go_tools):
    traced, _ = trace(examples["afterfunc_callback"], go_tools, runs=3, timeout_s=5.0)
    runs = traced.rows("go_runs")
    assert {run["status"] for run in runs} == {"ok"}
    callbacks = [
        {
            g["gpath"]: g["goroutine"]
            for g in run["goroutines"]
            if "AfterFunc" not in g["start_function"] and g["start_function"] != "main.main"
        }
        for run in runs
    ]
    assert callbacks[0] and all(c == callbacks[0] for c in callbacks)
    for run in runs:  # the callback's own transitions are there, not only its creation
        ids = set(callbacks[0].values())
        assert sum(e["goroutine"] in ids for e in run["events"]) >= 3


def test_no_event_names_the_generated_test_main(examples, go_tools):
    traced, _ = trace(examples["two_tests"], go_tools, runs=2, timeout_s=5.0)
    events = [e for run in traced.rows("go_runs") for e in run["events"]]
    assert events and not any(e["file"].endswith("_testmain.go") for e in events)


def test_inspect_reports_leaks_incomplete_runs_and_the_leak_signature(examples, tmp_path, ray_local):
    programs = tmp_path / "programs"
    shutil.copytree(EXAMPLES / "leak_unsatisfiable_select", programs / "leak_unsatisfiable_select")
    shutil.copytree(EXAMPLES / "spin_forever", programs / "spin_forever")
    out = str(tmp_path / "out")
    run_job(GoKind(), str(programs), GoConfig(go=GoSettings(runs=2, timeout_s=1.0)), out, workers=2)
    report = summarize(out)
    assert re.search(r"^  leak +2$", report, re.M) and re.search(r"^  timeout +2$", report, re.M)
    assert "incomplete runs (censored in go_next_event): 2 of 4  (timeout 2)" in report
    assert "goroutines leaked on select: 1" in report
    assert re.search(
        r"leak_unsatisfiable_select goroutine [0-9.]+: leaked in 2 runs; P\(GoUnblock \| blocked on "
        r"select\) = 0/\d+ = 0.00",
        report,
    )
