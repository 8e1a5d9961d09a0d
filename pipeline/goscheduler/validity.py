"""The Go scheduler's invariants as named rules over a run's `go_runs.events`: an event-sequence validity checker.

Every recorded run must satisfy them, so a violation means the harness's parser is wrong (the trace-go and
rederive-go stages make it a failure row, `sequence_failure` of pipeline/stages/go/runs.py); a model's sampled
continuation is valid up to its first violation. The rules follow the harness's mapping (go_harness/README.md,
"Validity rules"): a goroutine is in one of `Runnable`, `Running`, `Waiting`, `Syscall` or ended; each scheduler
event requires a state and implies the next one. User annotations (`schemas.go_runs.ANNOTATIONS`) are skipped.
Goroutine 0 of a main program exists before tracing starts: its first event is accepted in whatever state it
implies.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schemas.go_runs import ANNOTATIONS

RULES: dict[str, str] = {
    "known_event": "an event is GoCreate ('', created blocked, created in syscall), GoStart, GoBlock, GoUnblock, "
    "GoSched, GoEnd, GoSyscall (enter, exit), GoTransition ('From->To' of two live states) or an annotation",
    "created_before_use": "a goroutine's first event is its GoCreate; only goroutine 0 (a main program's main "
    "goroutine, alive before tracing starts) may first appear otherwise, in the state its first event implies",
    "created_once": "a goroutine is created at most once, before any other event of it",
    "creator_running": "a GoCreate's peer (the creating program goroutine) is running",
    "start_when_runnable": "GoStart only for a runnable goroutine",
    "block_when_running": "GoBlock only for a running goroutine",
    "sched_when_running": "GoSched only for a running goroutine",
    "syscall_enter_when_running": "GoSyscall enter only for a running goroutine",
    "syscall_exit_when_in_syscall": "GoSyscall exit only for a goroutine in a syscall (a slow exit is folded "
    "into one exit when the goroutine runs again)",
    "unblock_when_blocked": "GoUnblock only for a blocked (waiting) goroutine",
    "unblocker_running": "a GoUnblock's peer (the unblocking program goroutine) is running",
    "end_when_running": "GoEnd only for a running goroutine (or one in a syscall)",
    "transition_from_state": "a GoTransition 'From->To' only for a goroutine in state From",
    "ended_is_final": "a goroutine that ended has no further event (it ends once)",
    "max_running": "at most GOMAXPROCS program goroutines are running at once (when GOMAXPROCS is known)",
}

RUNNABLE, RUNNING, WAITING, SYSCALL, ENDED = "Runnable", "Running", "Waiting", "Syscall", "ended"
LIVE = (RUNNABLE, RUNNING, WAITING, SYSCALL)
CREATED = {"": RUNNABLE, "created blocked": WAITING, "created in syscall": SYSCALL}
# event -> (the rule, the states it requires, the state it implies); GoCreate and GoTransition are special.
MOVES = {
    "GoStart": ("start_when_runnable", (RUNNABLE,), RUNNING),
    "GoBlock": ("block_when_running", (RUNNING,), WAITING),
    "GoSched": ("sched_when_running", (RUNNING,), RUNNABLE),
    "GoUnblock": ("unblock_when_blocked", (WAITING,), RUNNABLE),
    "GoEnd": ("end_when_running", (RUNNING, SYSCALL), ENDED),
    ("GoSyscall", "enter"): ("syscall_enter_when_running", (RUNNING,), SYSCALL),
    ("GoSyscall", "exit"): ("syscall_exit_when_in_syscall", (SYSCALL,), RUNNING),
}
REASONLESS = ("GoStart", "GoUnblock", "GoEnd")
PREEXISTING = 0  # the one goroutine that may act before any GoCreate of it


@dataclass(frozen=True)
class Violation:
    """The first broken rule of an event: its position in the sequence given (annotations count), the rule (a
    key of RULES) and a message naming the goroutine, the event and the state it was in."""

    index: int
    rule: str
    message: str


class SchedulerChecker:
    """Checks events one at a time (`step`); after a violation it goes on from the state the event implies."""

    def __init__(self, gomaxprocs: int | None = None):
        self.gomaxprocs = gomaxprocs
        self.states: dict[int, str] = {}
        self.index = -1

    def step(self, event: Mapping[str, Any]) -> Violation | None:
        """The violation `event` makes (None when valid or an annotation), and the state it implies applied."""
        self.index += 1
        name, reason, goroutine = event["event"], event.get("reason", ""), event["goroutine"]
        if name in ANNOTATIONS:
            return None
        label = f"goroutine {goroutine}: {name}" + (f" {reason!r}" if reason else "")
        if name == "GoCreate":
            return self._create(goroutine, reason, event.get("peer", -1), label)
        target, rule, required = self._move(name, reason)
        if target is None:
            return self._violation("known_event", f"{label} is not a known event")
        state = self.states.get(goroutine)
        self.states[goroutine] = target
        if state is None and goroutine != PREEXISTING:
            return self._violation("created_before_use", f"{label} before any GoCreate of it")
        if state == ENDED:
            return self._violation("ended_is_final", f"{label} after it ended")
        if state is not None and state not in required:
            return self._violation(rule, f"{label} while {state}")
        if name == "GoUnblock" and event.get("peer", -1) >= 0:
            return self._peer_running(event["peer"], "unblocker_running", label)
        return self._within_gomaxprocs(target, state, label)

    def _move(self, name: str, reason: str) -> tuple[str | None, str, tuple[str, ...]]:
        """(the state the event implies, its rule, the states it requires); None when the event is unknown."""
        if name == "GoTransition":
            source, _, target = reason.partition("->")
            if source in LIVE and target in LIVE and source != target:
                return target, "transition_from_state", (source,)
            return None, "known_event", ()
        move = MOVES.get((name, reason) if name == "GoSyscall" else name)
        if move is None or (name in REASONLESS and reason):
            return None, "known_event", ()
        rule, required, target = move
        return target, rule, required

    def _create(self, goroutine: int, reason: str, peer: int, label: str) -> Violation | None:
        if reason not in CREATED:
            return self._violation("known_event", f"{label} is not a known event")
        seen = goroutine in self.states
        state = self.states.get(goroutine)
        self.states[goroutine] = CREATED[reason]
        if seen:
            return self._violation("created_once", f"{label} of a goroutine already seen ({state})")
        if peer >= 0:
            return self._peer_running(peer, "creator_running", label)
        return None

    def _peer_running(self, peer: int, rule: str, label: str) -> Violation | None:
        state = self.states.get(peer)
        if state is None and peer == PREEXISTING:
            self.states[peer] = RUNNING  # its first appearance: running, as it acts
            return self._within_gomaxprocs(RUNNING, None, f"goroutine {peer} (peer of {label})")
        if state != RUNNING:
            return self._violation(rule, f"{label} by goroutine {peer} while {state or 'never created'}")
        return None

    def _within_gomaxprocs(self, target: str, state: str | None, label: str) -> Violation | None:
        if self.gomaxprocs is None or target != RUNNING or state == RUNNING:
            return None
        running = sum(s == RUNNING for s in self.states.values())
        if running > self.gomaxprocs:
            return self._violation(
                "max_running", f"{label}: {running} goroutines running, GOMAXPROCS {self.gomaxprocs}"
            )
        return None

    def _violation(self, rule: str, message: str) -> Violation:
        return Violation(self.index, rule, message)


def first_violation(events: Iterable[Mapping[str, Any]], gomaxprocs: int | None = None) -> Violation | None:
    """The first rule a sequence of go_runs events breaks, or None when it is valid."""
    checker = SchedulerChecker(gomaxprocs)
    for event in events:
        violation = checker.step(event)
        if violation is not None:
            return violation
    return None
