"""Helpers of the debugger tests: real traces made in-process, and synthetic well-nested traces."""

import random

from debugger_programs import PROGRAMS

from tracers.trace.backends import trace_source
from tracers.trace.tracer import Budgets

WORKED_EXAMPLE = next(code for name, code, _, _ in PROGRAMS if name == "worked_example")


def trace_row(code: str, entry: str = "f", input: str = "", trace_id: str = "t0", **budgets) -> dict:
    """A `traces`-shaped row (locals as pairs, as `to_pylist()` gives them) from tracing `entry(input)`."""
    result = trace_source(code, entry, input, budgets=Budgets(**budgets) if budgets else None)
    events = [{**event, "locals": list(event["locals"].items())} for event in result["events"]]
    return {
        "trace_id": trace_id,
        "source_id": trace_id,
        "source_kind": "function",
        "code": code,
        "exit": result["exit"],
        "truncated": result["truncated"],
        "n_events": len(events),
        "events": events,
    }


_SOURCES = ["    x = 1", "    y = g(x)", "    if y:", "    return y", "        total += 1", "    pass"]


def synthetic_row(seed: int, max_events: int = 120, truncate: bool = False, repo: bool = False) -> dict:
    """A random well-nested trace: calls under lines, caught and final exceptions, generator resumes.

    The shape follows the tracer's rules (a frame's last event is its return or final exception; a
    resume is a `call` of a suspended frame id; a caught exception is followed by a line of its frame);
    the values are arbitrary. `truncate` cuts it at a random point with exit `never`.
    """
    rng = random.Random(seed)
    events: list[dict] = []
    suspended: list[int] = []  # generator frame ids that yielded and can be resumed
    first_args: dict[int, dict] = {}
    next_frame = [0]

    def emit(kind, frame, parent, depth, source, local_map, arg=None):
        events.append(
            {
                "index": len(events),
                "event": kind,
                "frame_id": frame,
                "parent_frame_id": parent,
                "depth": depth,
                "lineno": 1 + _SOURCES.index(source) if source in _SOURCES else 1,
                "function": f"fn{frame % 5}",
                "source": source,
                "locals": list(local_map.items()),
                "arg": arg,
            }
        )

    def activation(parent, depth):
        # Iterative enough for the sizes used: depth is bounded by 6.
        if suspended and rng.random() < 0.3:
            frame = suspended.pop(rng.randrange(len(suspended)))
            local_map = dict(first_args[frame], i=str(rng.randrange(5)))
            emit("call", frame, parent, depth, "    x = 1", local_map)
        else:
            frame = next_frame[0]
            next_frame[0] += 1
            local_map = {"a": str(rng.randrange(10))}
            first_args[frame] = dict(local_map)
            emit("call", frame, parent, depth, "def fn():", local_map)
        generator = rng.random() < 0.25
        for _ in range(rng.randrange(1, 5)):
            if len(events) >= max_events:
                break
            if rng.random() < 0.5:
                local_map = dict(local_map, **{rng.choice("bcd"): str(rng.randrange(10))})
            if rng.random() < 0.15 and len(local_map) > 1:
                local_map.pop(next(iter(set(local_map) - {"a"}), None), None)
            emit("line", frame, parent, depth, rng.choice(_SOURCES), local_map)
            if depth < 6:
                for _ in range(rng.choice((0, 0, 1, 1, 2))):
                    if activation(frame, depth + 1) == "raised" and rng.random() < 0.5:
                        emit("exception", frame, parent, depth, events[-1]["source"], local_map, "KeyError(1)")
                        emit(
                            "exception", frame, parent, depth, events[-2]["source"], local_map, "KeyError(1)"
                        ) if rng.random() < 0.3 else None
                        if rng.random() < 0.5:
                            emit("exception", frame, parent, depth, "    pass", local_map, "KeyError(1)")
                            return "raised"
                        emit("line", frame, parent, depth, "    pass", local_map)
            if rng.random() < 0.1:
                emit("exception", frame, parent, depth, events[-1]["source"], local_map, "ValueError(2)")
                emit("line", frame, parent, depth, "    pass", local_map)
        if rng.random() < 0.15:
            emit("exception", frame, parent, depth, "    return y", local_map, "RuntimeError()")
            return "raised"
        emit("return", frame, parent, depth, "    return y", local_map, str(rng.randrange(100)))
        if generator:
            suspended.append(frame)
        return "returned"

    outcome = activation(None, 0)
    row = {
        "trace_id": f"synthetic-{seed}",
        "source_id": f"synthetic-{seed}",
        "source_kind": "repo" if repo else "function",
        "code": "\n".join(_SOURCES + ["    never = 0"]),
        "exit": "error" if outcome == "raised" else "normal",
        "truncated": False,
        "events": events,
    }
    if truncate and len(events) > 1:
        row["events"] = events[: rng.randrange(1, len(events))]
        row["exit"], row["truncated"] = "never", True
    return row
