"""Strict reading of `go_harness` output (go_harness/README.md): the only thing the Go stage trusts.

Exact keys and types, bounded sizes, run indices in order, goroutine ids consistent with their key paths;
anything else raises `HarnessOutputError`, which the stage turns into a failure row. Also the canonical
goroutine ids shared by all runs of a program (`canonical_ids`, `renumber`).
"""

import json
import os
import re

from schemas.go_next_event import EVENT_TYPES
from schemas.go_runs import ANNOTATIONS, INSTRUMENTATIONS, STATUSES

MAX_TEXT = 64 << 10  # any one string in the harness output
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
GPATH = re.compile(r"\d{1,9}(\.\d{1,9})*")


class HarnessOutputError(ValueError):
    """The harness's output does not have the documented shape."""


# ---------------------------------------------------------------------------------------------------------
# Strict reading of the harness's JSON lines (go_harness/README.md).

RUN_KEYS = {
    "run_index": int,
    "mode": str,
    "status": str,
    "exit_code": int,
    "duration_ms": int,
    "gomaxprocs": (int, type(None)),
    "trace_file": str,
    "trace_error": str,
    "stderr_tail": str,
    "stdout_tail": str,
    "events": list,
    "truncated": bool,
    "goroutines": list,
    "leaked": list,
    "generations": int,
    "instrumentation": str,
    "rewrite_error": str,
}
EVENT_KEYS = {
    "index": int,
    "goroutine": int,
    "gpath": str,
    "event": str,
    "reason": str,
    "peer": int,
    "function": str,
    "file": str,
    "line": int,
    "time_ns": int,
    "category": str,
    "message": str,
    "object": str,
    "object_state": str,
}
EVENT_NAMES = EVENT_TYPES + ANNOTATIONS
OBJECT_EVENTS = ("ObjectOp", "GoBlock", "GoUnblock")  # the events that may name an object
GOROUTINE_KEYS = {"goroutine": int, "gpath": str, "start_function": str, "final_state": str, "final_reason": str}
LEAKED_KEYS = {"goroutine": int, "gpath": str, "state": str, "reason": str}
LEAKED_STATE = re.compile(r"created|runnable|running|syscall|blocked\((.*)\)", re.S)
TRAILER_KEYS = {
    "end": bool,
    "mode": str,
    "n_events": int,
    "truncated": bool,
    "trace_error": str,
    "goroutines": list,
    "generations": int,
}


def _no_duplicates(pairs: list[tuple]) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise HarnessOutputError(f"duplicate keys in {keys}")
    return dict(pairs)


def _object(value, keys: dict, what: str) -> dict:
    if not isinstance(value, dict):
        raise HarnessOutputError(f"{what} is not a JSON object")
    if set(value) != set(keys):
        raise HarnessOutputError(f"{what} has keys {sorted(value)}, expected {sorted(keys)}")
    for key, kind in keys.items():
        item = value[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if type(item) not in kinds:  # exact: a bool is not an int
            raise HarnessOutputError(
                f"{what}.{key} is {type(item).__name__}, expected {' or '.join(k.__name__ for k in kinds)}"
            )
        if type(item) is str and len(item) > MAX_TEXT:
            raise HarnessOutputError(f"{what}.{key} is longer than {MAX_TEXT} characters")
        if type(item) is int:
            low, high = INT64 if key in ("time_ns", "duration_ms") else INT32
            if not low <= item <= high:
                raise HarnessOutputError(f"{what}.{key} = {item} is out of range")
    return value


def _gpath(value: str, what: str) -> str:
    if not GPATH.fullmatch(value):
        raise HarnessOutputError(f"{what} gpath {value[:40]!r} is not a key path like '0.2.1'")
    return value


def check_goroutines(events: list[dict], goroutines: list[dict], what: str) -> dict[int, str]:
    """Validate events and goroutine summaries of one run; returns the run's {harness id: gpath}."""
    local: dict[int, str] = {}

    def bind(number: int, gpath: str, where: str) -> None:
        if number < 0 or local.setdefault(number, gpath) != gpath:
            raise HarnessOutputError(
                f"{where}: goroutine {number} is {gpath!r} here and {local.get(number)!r} elsewhere in the run"
            )

    for position, event in enumerate(events):
        where = f"{what}.events[{position}]"
        _object(event, EVENT_KEYS, where)
        if event["index"] != position:
            raise HarnessOutputError(f"{where}.index is {event['index']}, expected {position}")
        if event["event"] not in EVENT_NAMES:
            raise HarnessOutputError(f"{where}.event {event['event'][:40]!r} is not one of {', '.join(EVENT_NAMES)}")
        if event["event"] not in ANNOTATIONS and (event["category"] or event["message"]):
            raise HarnessOutputError(f"{where} is a {event['event']} with a category or message")
        if event["event"] not in OBJECT_EVENTS and (event["object"] or event["object_state"]):
            raise HarnessOutputError(f"{where} is a {event['event']} with an object")
        if event["line"] < 0 or event["time_ns"] < 0 or event["peer"] < -1:
            raise HarnessOutputError(f"{where} has a negative line, time or peer")
        bind(event["goroutine"], _gpath(event["gpath"], where), where)
    for position, summary in enumerate(goroutines):
        where = f"{what}.goroutines[{position}]"
        _object(summary, GOROUTINE_KEYS, where)
        bind(summary["goroutine"], _gpath(summary["gpath"], where), where)
    if len(set(local.values())) != len(local):
        raise HarnessOutputError(f"{what}: two goroutine ids share a gpath")
    for position, event in enumerate(events):
        if event["peer"] >= 0 and event["peer"] not in local:
            raise HarnessOutputError(f"{what}.events[{position}].peer {event['peer']} is no goroutine of the run")
    return local


def parse_harness_line(line: bytes, *, work: str, max_events: int) -> dict:
    """One `go_harness run` line, validated; raises HarnessOutputError."""
    try:
        run = json.loads(line, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as error:
        raise HarnessOutputError(f"not JSON ({str(error)[:200]})") from None
    what = "run"
    _object(run, RUN_KEYS, what)
    index = run["run_index"]
    if run["status"] not in STATUSES or run["mode"] not in ("main", "test"):
        raise HarnessOutputError(f"status {run['status'][:40]!r} or mode {run['mode'][:40]!r} is unknown")
    if (index == -1) != (run["status"] == "build_error") or index < -1:
        raise HarnessOutputError(f"run_index {index} does not fit status {run['status']!r}")
    if run["instrumentation"] not in INSTRUMENTATIONS or (run["instrumentation"] == "fallback") != bool(
        run["rewrite_error"]
    ):
        raise HarnessOutputError(
            f"instrumentation {run['instrumentation'][:40]!r} does not fit rewrite_error {run['rewrite_error'][:80]!r}"
        )
    if run["duration_ms"] < 0 or (run["gomaxprocs"] is not None and not 1 <= run["gomaxprocs"] < 1 << 20):
        raise HarnessOutputError("duration_ms or gomaxprocs is out of range")
    expected = os.path.join(work, f"run-{index}.trace")
    if run["trace_file"] not in ("", expected):
        raise HarnessOutputError(f"trace_file {run['trace_file'][:200]!r} is not {expected!r}")
    if len(run["events"]) > max_events:
        raise HarnessOutputError(f"{len(run['events'])} events exceed the cap of {max_events}")
    local = check_goroutines(run["events"], run["goroutines"], f"run {index}")
    if run["generations"] < 0:
        raise HarnessOutputError(f"run {index}: generations {run['generations']} is negative")
    if bool(run["leaked"]) != (run["status"] == "leak"):
        raise HarnessOutputError(
            f"run {index}: leaked goroutines {len(run['leaked'])} do not fit status {run['status']!r}"
        )
    for position, leaked in enumerate(run["leaked"]):
        where = f"run {index}.leaked[{position}]"
        _object(leaked, LEAKED_KEYS, where)
        if local.get(leaked["goroutine"]) != leaked["gpath"]:
            raise HarnessOutputError(
                f"{where}: goroutine {leaked['goroutine']} is not {leaked['gpath'][:40]!r} in the run"
            )
        state = LEAKED_STATE.fullmatch(leaked["state"])
        if state is None or (state.group(1) or "") != leaked["reason"]:
            raise HarnessOutputError(
                f"{where}: state {leaked['state'][:60]!r} is not created, runnable, running, syscall or "
                f"blocked(REASON) with its reason {leaked['reason'][:40]!r}"
            )
    return run


def parse_harness_output(output: bytes, *, work: str, max_events: int, finished: bool) -> list[dict]:
    """All runs in the harness's stdout. `finished`: the harness exited by itself, so every line must be
    whole; otherwise a cut-off last line is dropped. Run indices must be 0, 1, ... (or one build_error)."""
    lines = output.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    elif not finished:
        lines.pop()  # the harness was killed while writing it
    else:
        raise HarnessOutputError("the output does not end with a newline")
    runs = []
    for number, line in enumerate(lines, start=1):
        try:
            runs.append(parse_harness_line(line, work=work, max_events=max_events))
        except HarnessOutputError as error:
            raise HarnessOutputError(f"line {number}: {error}") from None
    indices = [run["run_index"] for run in runs]
    if indices != list(range(len(runs))) and indices != [-1]:
        raise HarnessOutputError(f"run indices {indices[:20]} are not 0, 1, ... (nor a single build_error)")
    return runs


# ---------------------------------------------------------------------------------------------------------
# Rows.


def gpath_order(gpath: str) -> tuple:
    """Breadth first: by depth, then component-wise (0, 1, 0.1, 0.2, 0.10, 0.2.1)."""
    parts = tuple(int(part) for part in gpath.split("."))
    return len(parts), parts


def canonical_ids(gpaths) -> dict[str, int]:
    """Program-wide goroutine ids: the rank of each key path among all paths, breadth first."""
    return {gpath: number for number, gpath in enumerate(sorted(set(gpaths), key=gpath_order))}


def run_gpaths(run: dict) -> set[str]:
    return {e["gpath"] for e in run["events"]} | {g["gpath"] for g in run["goroutines"]}


def renumber_leaked(leaked: list[dict], ids: dict[str, int]) -> list[dict]:
    """A run's leaked goroutines with program-canonical ids, by id."""
    rows = [
        {"goroutine": ids[g["gpath"]], "gpath": g["gpath"], "state": g["state"], "reason": g["reason"]} for g in leaked
    ]
    return sorted(rows, key=lambda g: g["goroutine"])


def renumber(events: list[dict], goroutines: list[dict], ids: dict[str, int]) -> tuple[list[dict], list[dict]]:
    """Events and goroutine summaries of one run with program-canonical ids (peer included)."""
    local = {e["goroutine"]: e["gpath"] for e in events} | {g["goroutine"]: g["gpath"] for g in goroutines}
    new_events = [
        {
            "index": e["index"],
            "goroutine": ids[e["gpath"]],
            "gpath": e["gpath"],
            "event": e["event"],
            "reason": e["reason"],
            "peer": ids[local[e["peer"]]] if e["peer"] >= 0 else -1,
            "function": e["function"],
            "file": e["file"],
            "line": e["line"],
            "time_ns": e["time_ns"],
            "category": e["category"],
            "message": e["message"],
            "object": e["object"],
            "object_state": e["object_state"],
        }
        for e in events
    ]
    new_goroutines = sorted(
        (
            {
                "goroutine": ids[g["gpath"]],
                "gpath": g["gpath"],
                "start_function": g["start_function"],
                "final_state": g["final_state"],
                "final_reason": g["final_reason"],
            }
            for g in goroutines
        ),
        key=lambda g: g["goroutine"],
    )
    return new_events, new_goroutines


def parse_trace_output(output: bytes, max_events: int) -> dict:
    """`go_harness parse` output (EVENT lines, then one trailer), validated; raises HarnessOutputError."""
    lines = output.split(b"\n")
    if lines[-1] != b"":
        raise HarnessOutputError("the output does not end with a newline")
    lines.pop()
    if not lines:
        raise HarnessOutputError("no trailer line")
    try:
        values = [json.loads(line, object_pairs_hook=_no_duplicates) for line in lines]
    except (ValueError, RecursionError) as error:
        raise HarnessOutputError(f"not JSON ({str(error)[:200]})") from None
    trailer = _object(values.pop(), TRAILER_KEYS, "trailer")
    if not trailer["end"] or trailer["n_events"] != len(values) or len(values) > max_events:
        raise HarnessOutputError("the trailer does not match the events")
    check_goroutines(values, trailer["goroutines"], "trace")
    return {
        "events": values,
        "goroutines": trailer["goroutines"],
        "truncated": trailer["truncated"],
        "trace_error": trailer["trace_error"],
        "mode": trailer["mode"],
        "generations": trailer["generations"],
    }
