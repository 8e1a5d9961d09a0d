"""The scheduler validity checker: each rule rejects a hand-made sequence that breaks it (and only that rule
fires), valid sequences pass, and the checker goes on from the implied state after a violation."""

import pytest
from go_helpers import requires_bwrap, requires_go

from pipeline.goscheduler.validity import RULES, SchedulerChecker, first_violation
from pipeline.stages.go.runs import sequence_failure


def ev(goroutine: int, event: str, reason: str = "", peer: int = -1) -> dict:
    return {"goroutine": goroutine, "event": event, "reason": reason, "peer": peer}


# Goroutine 0 starts (created here, as a test root is), creates 1 and 2; 1 runs, unblocks 0, is preempted; 2 ends.
VALID = [
    ev(0, "GoCreate"),
    ev(0, "GoStart"),
    ev(1, "GoCreate", peer=0),
    ev(0, "UserLog"),
    ev(2, "GoCreate", peer=0),
    ev(0, "GoBlock", "chan receive"),
    ev(1, "GoStart"),
    ev(1, "GoSyscall", "enter"),
    ev(1, "GoSyscall", "exit"),
    ev(0, "GoUnblock", peer=1),
    ev(1, "GoSched", "preempted"),
    ev(2, "GoStart"),
    ev(2, "GoEnd"),
    ev(0, "GoStart"),
    ev(0, "GoTransition", "Running->Waiting"),
    ev(0, "GoTransition", "Waiting->Running"),
    ev(1, "GoStart"),
    ev(1, "GoEnd"),
]
# A main program: goroutine 0 is first seen running (it creates 1), blocks; 1 starts and ends.
MAIN = [ev(1, "GoCreate", peer=0), ev(0, "GoBlock", "chan receive"), ev(1, "GoStart"), ev(1, "GoEnd")]
CREATED = MAIN[0]  # goroutine 0 running, 1 runnable

# One sequence per rule, breaking it at its last event (and only there).
INVALID = {
    "known_event": [ev(0, "GoWander")],
    "created_before_use": [ev(3, "GoStart")],
    "created_once": [CREATED, ev(1, "GoCreate", peer=0)],
    "creator_running": [ev(0, "GoBlock", "select"), ev(1, "GoCreate", peer=0)],
    "start_when_runnable": [CREATED, ev(1, "GoStart"), ev(1, "GoStart")],
    "block_when_running": [CREATED, ev(1, "GoBlock", "chan send")],
    "sched_when_running": [CREATED, ev(1, "GoSched", "runtime.Gosched")],
    "syscall_enter_when_running": [ev(1, "GoCreate", "created blocked", peer=0), ev(1, "GoSyscall", "enter")],
    "syscall_exit_when_in_syscall": [CREATED, ev(1, "GoStart"), ev(1, "GoSyscall", "exit")],
    "unblock_when_blocked": [CREATED, ev(1, "GoUnblock", peer=0)],
    "unblocker_running": [
        CREATED,
        ev(0, "GoBlock", "sync"),
        ev(1, "GoStart"),
        ev(1, "GoBlock", "sync"),
        ev(1, "GoUnblock", peer=0),
    ],
    "end_when_running": [CREATED, ev(1, "GoEnd")],
    "transition_from_state": [CREATED, ev(1, "GoTransition", "Waiting->Running")],
    "ended_is_final": [*MAIN, ev(1, "GoStart")],
    "max_running": [CREATED, ev(1, "GoStart")],
}


def test_every_rule_has_a_sequence_that_breaks_it():
    assert sorted(INVALID) == sorted(RULES)


def test_a_valid_sequence_passes_at_every_gomaxprocs_it_fits():
    assert first_violation(VALID) is None
    assert first_violation(VALID, gomaxprocs=2) is None
    assert first_violation(MAIN, gomaxprocs=1) is None


@pytest.mark.parametrize("rule", sorted(INVALID))
def test_each_rule_rejects_a_sequence_that_breaks_it(rule):
    events = INVALID[rule]
    gomaxprocs = 1 if rule == "max_running" else None
    violation = first_violation(events, gomaxprocs)
    assert violation is not None and (violation.rule, violation.index) == (rule, len(events) - 1)
    assert f"goroutine {events[-1]['goroutine']}" in violation.message
    assert first_violation(events[:-1], gomaxprocs) is None


def test_an_unknown_reason_is_an_unknown_event():
    for bad in (ev(0, "GoSyscall", "sideways"), ev(1, "GoCreate", "created sideways", peer=0), ev(0, "GoStart", "x")):
        assert first_violation([bad]).rule == "known_event"
    assert first_violation([ev(0, "GoTransition", "Running->NotExist")]).rule == "known_event"


def test_annotations_are_skipped_but_counted_in_the_index():
    events = [ev(5, "UserRegion", "begin"), ev(5, "UserLog"), ev(5, "GoStart")]
    violation = first_violation(events)
    assert (violation.index, violation.rule) == (2, "created_before_use")


def test_the_checker_goes_on_from_the_state_an_invalid_event_implies():
    checker = SchedulerChecker()
    steps = [checker.step(e) for e in [CREATED, ev(1, "GoBlock", "select"), ev(1, "GoUnblock"), ev(1, "GoStart")]]
    assert [s and s.rule for s in steps] == [None, "block_when_running", None, None]
    assert [s and s.index for s in steps] == [None, 1, None, None]


def test_a_run_with_an_invalid_sequence_is_a_failure_naming_the_run_event_and_rule():
    run = {"run_index": 3, "gomaxprocs": 1, "events": INVALID["max_running"]}
    failure = sequence_failure(run)
    assert failure is not None and failure.error_type == "InvalidEventSequence"
    assert "run 3: event 1 breaks the scheduler rule 'max_running'" in failure.message
    assert "parser is wrong" in failure.message
    assert sequence_failure({**run, "gomaxprocs": None}) is None


@requires_go
@requires_bwrap
def test_every_run_of_every_bundled_example_is_valid(traced_examples):
    statuses = set()
    for name, traced in traced_examples.items():
        for run in traced.rows("go_runs"):
            statuses.add(run["status"])
            assert first_violation(run["events"], run["gomaxprocs"]) is None, (name, run["run_index"])
        assert not [f for f in traced.rows("failures") if f["error_type"] == "InvalidEventSequence"], name
    assert statuses >= {"ok", "leak", "deadlock", "timeout", "panic", "exit_error", "build_error"}
