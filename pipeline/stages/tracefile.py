"""Strict parser of the tracer's output: the sandbox's files are untrusted data.

A trace file is JSON lines: a header object, then optionally a `start` object and event arrays,
then an `end` object (or a `failure` object). Every line is size-checked and type-checked; a file that
breaks the format raises `TraceFormatError`, which becomes a failure row.

Every string is made valid Unicode as it is read (`clean_text`), so one value can never stop a table from
being built: JSON lets a line carry lone surrogates (`"\udcff"`, what `os.fsdecode` makes of an undecodable
byte, or a `__repr__` returning such a string), which UTF-8 cannot encode.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

EVENT_KINDS = frozenset({"call", "line", "return", "exception"})
EXITS = frozenset({"normal", "error", "never"})
MAX_LINE_BYTES = 4 << 20
MAX_LABEL_CHARS = 200  # versions, reasons, error types: short labels, never a payload
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_NOT_A_BYTE_ESCAPE = re.compile("[\ud800-\udc7f\udd00-\udfff]")


class TraceFormatError(ValueError):
    """The tracer's output does not follow the format."""


def clean_text(text: str) -> str:
    """`text` as valid Unicode, unchanged when it already is.

    A lone surrogate in U+DC80..U+DCFF stands for the byte `surrogateescape` turned into it; those bytes are
    decoded as UTF-8 again, and whatever is still not UTF-8, like every other lone surrogate, becomes U+FFFD.
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        bytes_back = _NOT_A_BYTE_ESCAPE.sub("\ufffd", text).encode("utf-8", "surrogateescape")
        return bytes_back.decode("utf-8", "replace")


def clean_value(value: Any) -> Any:
    """A parsed JSON value with every string in it (keys too) passed through `clean_text`."""
    if type(value) is str:
        return clean_text(value)
    if type(value) is list:
        return [clean_value(item) for item in value]
    if type(value) is dict:
        return {clean_text(key): clean_value(item) for key, item in value.items()}
    return value


def label(value, what: str) -> str | None:
    """A short string field (a version, a reason, an error type) or None; anything else is a TraceFormatError."""
    require(value is None or (type(value) is str and len(value) <= MAX_LABEL_CHARS), f"bad {what}")
    return value


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


def parse_event(values, expected_index: int, where: str = "", frames: dict | None = None) -> dict:
    """One event array of the tracer (tracers/pytrace.py EVENT_FIELDS), checked field by field.

    With `frames` (frame_id -> the locals of its previous event, updated here) the locals may be a delta,
    `{name: repr}` over the frame's previous event (tracers/pytrace.py): every name in it must be one that
    event had, so a delta never refers to a frame or a local that was not sent; without, only full lists."""
    at = f"{where}event {expected_index}"
    if type(values) is not list or len(values) != 10:
        raise TraceFormatError(f"{at}: not a 10-field array")
    index, kind, frame_id, parent, depth, lineno, function, source, pairs, arg = values
    if index != expected_index or type(index) is not int:
        raise TraceFormatError(f"{at}: index {index!r} out of order")
    if type(kind) is not str or kind not in EVENT_KINDS:
        raise TraceFormatError(f"{at}: unknown event type {kind!r}")
    for value in (frame_id, depth, lineno):
        if type(value) is not int or not 0 <= value < _INT_LIMIT:
            raise TraceFormatError(f"{at}: bad frame_id/depth/lineno {value!r}")
    if parent is not None and (type(parent) is not int or not 0 <= parent < _INT_LIMIT):
        raise TraceFormatError(f"{at}: bad parent {parent!r}")
    if type(function) is not str or type(source) is not str or (arg is not None and type(arg) is not str):
        raise TraceFormatError(f"{at}: bad function/source/arg")
    if type(pairs) is dict and frames is not None:
        local_pairs = _apply_delta(pairs, frames.get(frame_id), at)
    elif type(pairs) is list:
        local_pairs = []
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not str:
                raise TraceFormatError(f"{at}: bad locals")
            local_pairs.append((pair[0], pair[1]))
    else:
        raise TraceFormatError(f"{at}: bad locals")
    if frames is not None:
        frames[frame_id] = local_pairs
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


def _apply_delta(delta: dict, previous: list | None, at: str) -> list:
    """The frame's previous locals with the reprs of `delta` in place; a TraceFormatError when the frame had
    no event before or the delta names a local that event did not have."""
    if previous is None:
        raise TraceFormatError(f"{at}: a delta of locals for a frame with no event before")
    pairs, found = [], 0
    for name, text in previous:
        new = delta.get(name)
        if new is None:
            pairs.append((name, text))
        else:
            if type(new) is not str:
                raise TraceFormatError(f"{at}: bad locals")
            pairs.append((name, new))
            found += 1
    if found != len(delta):
        raise TraceFormatError(f"{at}: a delta of locals names a local its frame did not have")
    return pairs


def parse_trace_file(data: bytes, max_events: int) -> ParsedTrace:
    """Parse one trace file's bytes; a torn last line (a killed writer) is dropped, nothing else is."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    require(bool(lines), "empty trace file")
    header = _object(lines[0], 0)
    require(header.get("type") == "header", "first line is not a header")
    for name in ("python", "tracer_version", "repr_mode"):
        label(header.get(name), f"header {name}")
    events, end, failure = [], None, None
    frames: dict[int, list] = {}
    for number, raw in enumerate(lines[1:], start=1):
        if end is not None or failure is not None:
            raise TraceFormatError(f"line {number}: data after the end of the trace")
        if raw.startswith(b"["):
            require(len(events) < max_events, f"more than {max_events} events")
            events.append(parse_event(load_line(raw, number), len(events), frames=frames))
            continue
        obj = _object(raw, number)
        kind = obj.get("type")
        if kind == "start":
            require(not events, "start after events")
        elif kind == "end":
            require(type(obj.get("exit")) is str and obj["exit"] in EXITS, "bad end exit")
            require(type(obj.get("truncated")) is bool, "bad end truncated")
            label(obj.get("reason"), "end reason")
            result = obj.get("result")
            require(result is None or (type(result) is str and len(result) <= 100_000), "bad end result")
            capped = obj.get("n_capped", 0)
            require(type(capped) is int and 0 <= capped < 1 << 31, "bad end n_capped")
            end = obj
        elif kind == "failure":
            require(not events and type(obj.get("message")) is str, "bad failure object")
            require(type(label(obj.get("error_type"), "failure error_type")) is str, "bad failure error_type")
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


def load_line(raw: bytes, number: int) -> Any:
    """One JSON line, size-checked; TraceFormatError names the line."""
    require(len(raw) <= MAX_LINE_BYTES, f"line {number}: longer than {MAX_LINE_BYTES} bytes")
    try:
        value = json.loads(raw)
        if raw.isascii() and _SURROGATE_ESCAPE.search(raw) is None:
            return value  # no string in it can hold a lone surrogate
        return clean_value(value)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise TraceFormatError(f"line {number}: not JSON ({error})") from error


def _object(raw: bytes, number: int) -> dict:
    value = load_line(raw, number)
    require(isinstance(value, dict), f"line {number}: expected an object")
    return value
