"""A Go run's scheduler events and the state they leave a goroutine in: what go_next_event keys and counts, what
the packed Go documents show and what evaluation replays (schemas/go_next_event.py `state`)."""

from collections.abc import Sequence

from schemas.go_runs import ANNOTATIONS

STATE_AFTER = {
    "GoCreate": "runnable",
    "GoUnblock": "runnable",
    "GoSched": "runnable",
    "GoStart": "running",
    "GoEnd": "ended",
}


def blocked_on(event: dict) -> str:
    """What a GoBlock waits for: its reason, then the object and the object's state when the run was rewritten
    (go_runs `object`, `object_state`, absent from rows older than version 4), e.g. 'chan receive:
    chan@main.go:12 recv, len 0/1, senders 0'."""
    waits_on = " ".join(part for part in (event.get("object", ""), event.get("object_state", "")) if part)
    return f"{event['reason']}: {waits_on}" if waits_on else event["reason"]


def state_after(events: Sequence[dict]) -> str:
    """Where a goroutine's events leave it (schemas/go_next_event.py `state`)."""
    if not events:
        return "not_created"
    last = events[-1]
    if last["event"] == "GoBlock":
        return f"blocked({blocked_on(last)})"
    if last["event"] == "GoSyscall":
        return "syscall" if last["reason"] == "enter" else "running"
    return STATE_AFTER.get(last["event"], "other")


def scheduler_events(events: Sequence[dict]) -> list[dict]:
    """A run's events without its user annotations (what go_next_event keys and counts)."""
    return [event for event in events if event["event"] not in ANNOTATIONS]
