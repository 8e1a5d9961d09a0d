"""Strict parser of the tracer's output: the sandbox's files are untrusted data.

A trace file is JSON lines: a header object, then optionally a `start` object and event arrays,
then an `end` object (or a `failure` object). Every line is size-checked and type-checked; a file that
breaks the format raises `TraceFormatError`, which becomes a failure row.
"""

import json
from dataclasses import dataclass

EVENT_KINDS = frozenset({"call", "line", "return", "exception"})
EXITS = frozenset({"normal", "error", "never"})
MAX_LINE_BYTES = 4 << 20


class TraceFormatError(ValueError):
    """The tracer's output does not follow the format."""


@dataclass
class ParsedTrace:
    header: dict
    events: list[dict]
    end: dict | None
    failure: dict | None


def require(condition: bool, what: str) -> None:
    """Raise TraceFormatError(what) unless `condition` holds."""
    if not condition:
        raise TraceFormatError(what)


_INT_LIMIT = 2**31


def parse_event(values, expected_index: int, where: str = "") -> dict:
    """One event array of the tracer (tracers/pytrace.py EVENT_FIELDS), checked field by field."""
    at = f"{where}event {expected_index}"
    if type(values) is not list or len(values) != 10:
        raise TraceFormatError(f"{at}: not a 10-field array")
    index, kind, frame_id, parent, depth, lineno, function, source, pairs, arg = values
    if index != expected_index or type(index) is not int:
        raise TraceFormatError(f"{at}: index {index!r} out of order")
    if kind not in EVENT_KINDS:
        raise TraceFormatError(f"{at}: unknown event type {kind!r}")
    for value in (frame_id, depth, lineno):
        if type(value) is not int or not 0 <= value < _INT_LIMIT:
            raise TraceFormatError(f"{at}: bad frame_id/depth/lineno {value!r}")
    if parent is not None and (type(parent) is not int or not 0 <= parent < _INT_LIMIT):
        raise TraceFormatError(f"{at}: bad parent {parent!r}")
    if type(function) is not str or type(source) is not str or (arg is not None and type(arg) is not str):
        raise TraceFormatError(f"{at}: bad function/source/arg")
    if type(pairs) is not list:
        raise TraceFormatError(f"{at}: bad locals")
    local_pairs = []
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not str:
            raise TraceFormatError(f"{at}: bad locals")
        local_pairs.append((pair[0], pair[1]))
    return {
        "index": index,
        "event": kind,
        "frame_id": frame_id,
        "parent_frame_id": parent,
        "depth": depth,
        "lineno": lineno,
        "function": function,
        "source": source,
        "locals": local_pairs,
        "arg": arg,
    }


def parse_trace_file(data: bytes, max_events: int) -> ParsedTrace:
    """Parse one trace file's bytes; a torn last line (a killed writer) is dropped, nothing else is."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    require(bool(lines), "empty trace file")
    header = _object(lines[0], 0)
    require(header.get("type") == "header", "first line is not a header")
    events, end, failure = [], None, None
    for number, raw in enumerate(lines[1:], start=1):
        if end is not None or failure is not None:
            raise TraceFormatError(f"line {number}: data after the end of the trace")
        if raw.startswith(b"["):
            require(len(events) < max_events, f"more than {max_events} events")
            events.append(parse_event(load_line(raw, number), len(events)))
            continue
        obj = _object(raw, number)
        kind = obj.get("type")
        if kind == "start":
            require(not events, "start after events")
        elif kind == "end":
            require(obj.get("exit") in EXITS and isinstance(obj.get("truncated"), bool), "bad end object")
            result = obj.get("result")
            require(result is None or (type(result) is str and len(result) <= 100_000), "bad end result")
            end = obj
        elif kind == "failure":
            require(not events and isinstance(obj.get("message"), str), "bad failure object")
            failure = obj
        else:
            raise TraceFormatError(f"line {number}: unknown object type {kind!r}")
    require(end is not None or failure is not None, "trace has no end")
    return ParsedTrace(header, events, end, failure)


def parse_parity_file(data: bytes) -> dict:
    """The untraced run's result (tracers/function_runner.py): `{"type": "parity", "exit", "result"}`."""
    lines = data.split(b"\n")
    require(len(lines) == 2 and lines[1] == b"", "a parity file is one line")
    value = _object(lines[0], 0)
    require(value.get("type") == "parity", "not a parity object")
    require(value.get("exit") in ("normal", "error"), "bad parity exit")
    require(type(value.get("result")) is str and len(value["result"]) <= 100_000, "bad parity result")
    return value


def load_line(raw: bytes, number: int):
    """One JSON line, size-checked; TraceFormatError names the line."""
    require(len(raw) <= MAX_LINE_BYTES, f"line {number}: longer than {MAX_LINE_BYTES} bytes")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"line {number}: not JSON ({error})") from error


def _object(raw: bytes, number: int) -> dict:
    value = load_line(raw, number)
    require(isinstance(value, dict), f"line {number}: expected an object")
    return value
