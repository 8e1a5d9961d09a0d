"""Strict parser of the tracer's output: the sandbox's files are untrusted data.

A trace file is JSON lines: a header object, then optionally a `start` object and event arrays,
then an `end` object (or a `failure` object). Every line is size-checked and type-checked; a file that
breaks the format raises `TraceFormatError`, which becomes a failure row. An event's locals are a full
`[[name, repr], ...]` list or a delta `{name: repr}` over its frame's previous event (tracers/trace/tracer.py),
which the parser turns back into the full list; a delta that names a frame or a local not sent before is
malformed.

Speed without a second format: an event line is decoded and type-checked in C (`fast_event`, msgspec) and
an object line by orjson where that gives exactly what `json` gives; every other line goes the exact way
(`load_line`, `parse_event`), so the same lines are accepted, with the same values, and every error reads
as it did.

Every string is made valid Unicode as it is read (`clean_text`), so one value can never stop a table from
being built: JSON lets a line carry lone surrogates (`"\udcff"`, what `os.fsdecode` makes of an undecodable
byte, or a `__repr__` returning such a string), which UTF-8 cannot encode.
"""

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
import orjson

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
_Id = Annotated[int, msgspec.Meta(ge=0, lt=_INT_LIMIT)]
# An event line as parse_event accepts it, decoded and checked in C (a bool is no int here either).
_EVENT_LINE = msgspec.json.Decoder(
    tuple[
        int,
        Literal["call", "line", "return", "exception"],
        _Id,
        _Id | None,
        _Id,
        _Id,
        str,
        str,
        list[tuple[str, str]] | dict[str, str],
        str | None,
    ]
).decode
REFUSED = (msgspec.DecodeError, TraceFormatError)  # what `fast_event` raises for a line it leaves to the exact way
_FLAT_SCALARS = frozenset((str, int, bool, type(None)))


def parse_event(values, expected_index: int, where: str = "", frames: dict | None = None) -> dict:
    """One event array of the tracer (tracers/trace/tracer.py EVENT_FIELDS), checked field by field.

    With `frames` (frame_id -> the locals of its previous event, updated here) the locals may be a delta,
    `{name: repr}` over the frame's previous event (tracers/trace/tracer.py): every name in it must be one that
    event had, so a delta never refers to a frame or a local that was not sent; without, only full lists.
    The error's text is only built when there is one: this runs once per event."""
    if type(values) is not list or len(values) != 10:
        raise _bad(where, expected_index, "not a 10-field array")
    index, kind, frame_id, parent, depth, lineno, function, source, pairs, arg = values
    if index != expected_index or type(index) is not int:
        raise _bad(where, expected_index, f"index {index!r} out of order")
    if type(kind) is not str or kind not in EVENT_KINDS:
        raise _bad(where, expected_index, f"unknown event type {kind!r}")
    if type(frame_id) is not int or not 0 <= frame_id < _INT_LIMIT:
        raise _bad(where, expected_index, f"bad frame_id/depth/lineno {frame_id!r}")
    if type(depth) is not int or not 0 <= depth < _INT_LIMIT:
        raise _bad(where, expected_index, f"bad frame_id/depth/lineno {depth!r}")
    if type(lineno) is not int or not 0 <= lineno < _INT_LIMIT:
        raise _bad(where, expected_index, f"bad frame_id/depth/lineno {lineno!r}")
    if parent is not None and (type(parent) is not int or not 0 <= parent < _INT_LIMIT):
        raise _bad(where, expected_index, f"bad parent {parent!r}")
    if type(function) is not str or type(source) is not str or (arg is not None and type(arg) is not str):
        raise _bad(where, expected_index, "bad function/source/arg")
    if type(pairs) is list:
        local_pairs = [
            (pair[0], pair[1])
            for pair in pairs
            if type(pair) is list and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str
        ]
        if len(local_pairs) != len(pairs):
            raise _bad(where, expected_index, "bad locals")
    elif type(pairs) is dict and frames is not None:
        local_pairs = _apply_delta(pairs, frames.get(frame_id), where, expected_index)
    else:
        raise _bad(where, expected_index, "bad locals")
    if frames is not None:
        frames[frame_id] = local_pairs
    return _event(values, local_pairs)


def fast_event(raw: bytes, expected_index: int, frames: dict | None = None) -> dict:
    """`parse_event` of an event line's `load_line` value, for a line that needs no cleaning and passes every
    check; any other line raises one of REFUSED, and its caller takes the exact way (`load_line`, then
    `parse_event`), which gives the same value or names the error as it always did. (msgspec accepts what
    `json` accepts, with the same values, and refuses lone surrogates, which `load_line` cleans.)"""
    if len(raw) > MAX_LINE_BYTES:
        raise TraceFormatError("too long")
    values = _EVENT_LINE(raw)
    if values[0] != expected_index:
        raise TraceFormatError("out of order")
    pairs = values[8]
    if isinstance(pairs, dict):
        if frames is None:
            raise TraceFormatError("a delta outside a function trace")
        pairs = _apply_delta(pairs, frames.get(values[2]), "", expected_index)
    if frames is not None:
        frames[values[2]] = pairs
    return _event(values, pairs)


def _event(values, local_pairs: list) -> dict:
    index, kind, frame_id, parent, depth, lineno, function, source, _, arg = values
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


def _bad(where: str, index: int, what: str) -> TraceFormatError:
    return TraceFormatError(f"{where}event {index}: {what}")


def _apply_delta(delta: dict, previous: list | None, where: str, index: int) -> list:
    """The frame's previous locals with the reprs of `delta` in place; a TraceFormatError when the frame had
    no event before or the delta names a local that event did not have."""
    if previous is None:
        raise _bad(where, index, "a delta of locals for a frame with no event before")
    pairs, found = [], 0
    for name, text in previous:
        new = delta.get(name)
        if new is None:
            pairs.append((name, text))
        else:
            if type(new) is not str:
                raise _bad(where, index, "bad locals")
            pairs.append((name, new))
            found += 1
    if found != len(delta):
        raise _bad(where, index, "a delta of locals names a local its frame did not have")
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
            index = len(events)
            if index >= max_events:
                raise TraceFormatError(f"more than {max_events} events")
            try:
                events.append(fast_event(raw, index, frames))
            except REFUSED:
                events.append(parse_event(load_line(raw, number), index, frames=frames))
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
    """The untraced run's result (tracers/runners/functions.py): `{"type": "parity", "exit", "result"}`."""
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


def json_bytes(value: Any, sort_keys: bool = False) -> bytes:
    """Exactly `json.dumps(value, separators=(",", ":"), sort_keys=sort_keys).encode()` (ASCII, non-ASCII
    escaped), made by orjson when its output is the same: ASCII without DEL, which `json` escapes (a value
    of str keys, ints, strings, None, lists and tuples: what content hashes are taken of)."""
    try:
        fast = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except TypeError:  # what orjson cannot write (an int past 64 bits): json writes it
        fast = b"\x7f"
    if fast.isascii() and b"\x7f" not in fast:
        return fast
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys).encode()


def decode_line(raw: bytes, number: int) -> Any:
    """What `load_line` gives, decoded by orjson where it can (what orjson refuses, `json` decodes or
    rejects and `clean_value` cleans: lone surrogates, a BOM, NaN, numbers past a double)."""
    if len(raw) <= MAX_LINE_BYTES:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return load_line(raw, number)


def load_flat(raw: bytes, number: int) -> Any:
    """What `load_line` gives, by orjson when that is an object of strings, ints, bools and nulls only
    (where the two always agree), else by `load_line` itself: the tracer's header, start and end objects."""
    value = decode_line(raw, number)
    if type(value) is dict and _FLAT_SCALARS.issuperset(map(type, value.values())):
        return value
    return load_line(raw, number)


def parse_decoded_event(value, raw: bytes, number: int, expected_index: int, where: str = "") -> dict:
    """`parse_event` of a line's `decode_line` value; a value it refuses is decoded again by `load_line` and
    checked again, so the error is the one `load_line`'s value gives (orjson reads an integer past 64 bits as
    a float, which `json` keeps an int)."""
    try:
        return parse_event(value, expected_index)
    except TraceFormatError:
        return parse_event(load_line(raw, number), expected_index, where)


def _object(raw: bytes, number: int) -> dict:
    value = load_flat(raw, number)
    require(isinstance(value, dict), f"line {number}: expected an object")
    return value
