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


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise TraceFormatError(what)


def _event(values: list, expected_index: int) -> dict:
    _check(isinstance(values, list) and len(values) == 10, f"event {expected_index}: not a 10-field array")
    index, kind, frame_id, parent, depth, lineno, function, source, local_pairs, arg = values
    _check(index == expected_index, f"event {expected_index}: index {index!r} out of order")
    _check(kind in EVENT_KINDS, f"event {index}: unknown event type {kind!r}")
    for name, value in (("frame_id", frame_id), ("depth", depth), ("lineno", lineno)):
        _check(type(value) is int and 0 <= value < 2**31, f"event {index}: bad {name} {value!r}")
    _check(parent is None or (type(parent) is int and 0 <= parent < 2**31), f"event {index}: bad parent")
    _check(isinstance(function, str) and isinstance(source, str), f"event {index}: bad function/source")
    _check(arg is None or isinstance(arg, str), f"event {index}: bad arg")
    _check(isinstance(local_pairs, list) and all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str)
        for pair in local_pairs), f"event {index}: bad locals")
    return {"index": index, "event": kind, "frame_id": frame_id, "parent_frame_id": parent, "depth": depth,
            "lineno": lineno, "function": function, "source": source,
            "locals": [tuple(pair) for pair in local_pairs], "arg": arg}


def parse_trace_file(data: bytes, max_events: int) -> ParsedTrace:
    """Parse one trace file's bytes; a torn last line (a killed writer) is dropped, nothing else is."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    _check(bool(lines), "empty trace file")
    header = _object(lines[0], 0)
    _check(header.get("type") == "header", "first line is not a header")
    events, end, failure = [], None, None
    for number, raw in enumerate(lines[1:], start=1):
        if end is not None or failure is not None:
            raise TraceFormatError(f"line {number}: data after the end of the trace")
        if raw.startswith(b"["):
            _check(len(events) < max_events, f"more than {max_events} events")
            events.append(_event(_load(raw, number), len(events)))
            continue
        obj = _object(raw, number)
        kind = obj.get("type")
        if kind == "start":
            _check(not events, "start after events")
        elif kind == "end":
            _check(obj.get("exit") in EXITS and isinstance(obj.get("truncated"), bool), "bad end object")
            end = obj
        elif kind == "failure":
            _check(not events and isinstance(obj.get("message"), str), "bad failure object")
            failure = obj
        else:
            raise TraceFormatError(f"line {number}: unknown object type {kind!r}")
    _check(end is not None or failure is not None, "trace has no end")
    return ParsedTrace(header, events, end, failure)


def _load(raw: bytes, number: int):
    _check(len(raw) <= MAX_LINE_BYTES, f"line {number}: longer than {MAX_LINE_BYTES} bytes")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"line {number}: not JSON ({error})") from error


def _object(raw: bytes, number: int) -> dict:
    value = _load(raw, number)
    _check(isinstance(value, dict), f"line {number}: expected an object")
    return value
