"""Strict parser of the pytest plugin's output stream (tracers/suite/pytest_plugin.py): untrusted data.

The stream is JSON lines: a header; per test a `test` object, event arrays (tracers/trace/tracer.py's
format, checked by `pipeline.stages.tracefile.parse_event`), `entry` objects marking each repository call's
range of events (a generator's: its `ranges`, one per activation), and a `test_end`; plus `collected`,
`collect_error` and `violation` objects and a final `end`.
The first malformed line ends the parse (what came before is kept); a torn last line is dropped.
"""

import io
import os
from dataclasses import dataclass, field
from typing import cast

from pipeline.stages.tracefile import (
    MAX_LINE_BYTES,
    REFUSED,
    TraceFormatError,
    decode_line,
    fast_event,
    load_flat,
    parse_decoded_event,
    require,
)

EXITS = frozenset({"normal", "error", "never"})
OUTCOMES = frozenset({"passed", "failed", "error", "skipped"})
STOPS = frozenset({None, "max_output_bytes"})  # why a run stopped before its last test (end.stopped)
VIOLATIONS = {
    "write": "WriteOutsideScratch",
    "network": "NetworkAccess",
    "fork_bomb": "ForkBomb",
    "timeout": "TestTimeout",
    "output_flood": "OutputFlood",
    "tracer_disabled": "TracerDisabled",
    "tracer_patched": "TracerTampered",
}


@dataclass
class ParsedTest:
    nodeid: str
    events: list[dict] = field(default_factory=list)
    entries: list[dict] = field(default_factory=list)
    outcome: str | None = None
    message: str | None = None
    n_events: int = 0


@dataclass
class ParsedStream:
    header: dict | None = None
    tests: list[ParsedTest] = field(default_factory=list)
    collect_errors: list[dict] = field(default_factory=list)
    violations: list[dict] = field(default_factory=list)
    end: dict | None = None
    error: str | None = None  # why parsing stopped early (the rest of the stream is not trusted)
    interrupted: list[dict] = field(default_factory=list)  # tests that ended their run (run.py restarts)
    collected: dict | None = None  # {"count", "seconds"}: the tests pytest collected, and when
    restarts: int = 0  # runs of the suite after the first (run.py)


def _opt_str(value, limit: int = 100_000) -> bool:
    return value is None or (isinstance(value, str) and len(value) <= limit)


def _int(value) -> bool:
    return type(value) is int and 0 <= value < 2**31


def _in_test(test: ParsedTest | None, what: str) -> ParsedTest:
    """The test being read; a TraceFormatError(what) when no test is open."""
    if test is None:
        raise TraceFormatError(what)
    return test


def parse_repo_stream(source, max_events: int, on_test=None, max_bytes: int | None = None) -> ParsedStream:
    """Parse the plugin's output (bytes or a binary file) strictly.

    Tests parsed before a malformed line are kept; the first malformed line ends the parse with
    `error` set. A torn last line (a killed writer) is dropped. `on_test(stream, test)` is called as
    each test is complete (and for a test the run ended inside), after which its events and entries are released
    (`n_events` keeps their count): a large suite is never held in memory at once. A run of event lines is
    decoded and checked when the next object line (or the end) comes, each line on its own; no error text
    is built unless there is an error."""
    parser = _StreamParser(max_events, on_test, max_bytes)
    lines = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        for number, raw in enumerate(lines, start=1):
            if not raw.endswith(b"\n"):
                break  # torn by a kill
            parser.line(number, raw)
        if parser.pending:
            parser.decode_pending("events outside a test")
    except TraceFormatError as error:
        parser.stream.error = str(error)
    if parser.test is not None and parser.stream.error is None:
        parser.finish(parser.test)  # the run ended inside this test: its closed entries are kept
    return parser.stream


class _StreamParser:
    """One parse: the stream so far, the test being read, its event lines not yet decoded and the bytes read."""

    def __init__(self, max_events: int, on_test, max_bytes: int | None):
        self.max_events, self.on_test, self.max_bytes = max_events, on_test, max_bytes
        self.stream = ParsedStream()
        self.test: ParsedTest | None = None
        self.pending: list[tuple[int, bytes]] = []
        self.read = 0

    def line(self, number: int, raw: bytes) -> None:
        """Take line `number` (with its newline): an event line waits in `pending`, an object is checked."""
        self.read += len(raw)
        if self.max_bytes is not None and self.read > self.max_bytes:
            raise TraceFormatError(f"line {number}: output over {self.max_bytes} bytes")
        raw = raw[:-1]
        if len(raw) > MAX_LINE_BYTES:
            raise TraceFormatError(f"line {number}: longer than {MAX_LINE_BYTES} bytes")
        if raw.startswith(b"[") and number > 1:
            test = self.test
            if test is None or self.stream.end is not None:
                raise TraceFormatError(f"line {number}: an event outside a test")
            if len(test.events) + len(self.pending) >= self.max_events:
                raise TraceFormatError(f"line {number}: more than {self.max_events} events in a test")
            self.pending.append((number, raw))
            return
        if self.pending:
            self.decode_pending(f"line {number}: events outside a test")
        require(self.stream.end is None, f"line {number}: data after the end object")
        value = load_flat(raw, number)
        if number == 1:
            require(isinstance(value, dict) and value.get("type") == "header", "line 1: not a header")
            self.stream.header = value
            return
        require(isinstance(value, dict), f"line {number}: neither an event nor an object")
        kind = value.get("type")
        take = _OBJECTS.get(kind) if isinstance(kind, str) else None
        if take is None:
            raise TraceFormatError(f"line {number}: unknown object type {kind!r}")
        take(self, value, number)

    def decode_pending(self, outside: str) -> None:
        """Decode the pending event lines into the open test's events (`outside`: the error when none is)."""
        _decode_events(self.pending, _in_test(self.test, outside).events)
        self.pending = []

    def finish(self, done: ParsedTest) -> None:
        """Hand a finished test to `on_test`, then release its events and entries (keeping their count)."""
        if self.on_test is not None:
            self.on_test(self.stream, done)
        done.n_events = len(done.events)
        if self.on_test is not None:
            done.events, done.entries = [], []
        self.stream.tests.append(done)

    def test_start(self, value: dict, number: int) -> None:
        require(self.test is None, f"line {number}: a test starts before the previous one ended")
        require(isinstance(value.get("nodeid"), str), f"line {number}: bad test object")
        self.test = ParsedTest(value["nodeid"])

    def entry(self, value: dict, number: int) -> None:
        current = _in_test(self.test, f"line {number}: an entry outside a test")
        current.entries.append(_entry(value, current.events, number))

    def test_end(self, value: dict, number: int) -> None:
        current = _in_test(self.test, f"line {number}: bad test_end")
        require(value.get("nodeid") == current.nodeid, f"line {number}: bad test_end")
        require(
            value.get("outcome") in OUTCOMES and _opt_str(value.get("message")),
            f"line {number}: bad test_end outcome or message",
        )
        current.outcome, current.message = value["outcome"], value.get("message")
        self.finish(current)
        self.test = None

    def collected(self, value: dict, number: int) -> None:
        require(
            self.stream.collected is None
            and _int(value.get("count"))
            and type(value.get("seconds")) in (int, float)
            and 0 <= value["seconds"] < 1e7,
            f"line {number}: bad collected object",
        )
        self.stream.collected = value

    def collect_error(self, value: dict, number: int) -> None:
        require(
            _opt_str(value.get("nodeid")) and _opt_str(value.get("message")),
            f"line {number}: bad collect_error",
        )
        self.stream.collect_errors.append(value)

    def violation(self, value: dict, number: int) -> None:
        require(
            value.get("kind") in VIOLATIONS and _opt_str(value.get("nodeid")) and _opt_str(value.get("detail")),
            f"line {number}: bad violation",
        )
        self.stream.violations.append(value)

    def end(self, value: dict, number: int) -> None:
        require(
            (value.get("exitstatus") is None or type(value.get("exitstatus")) is int) and value.get("stopped") in STOPS,
            f"line {number}: bad end object",
        )
        self.stream.end = value


_OBJECTS = {  # each object line's type and the parser's step that checks and takes it
    "test": _StreamParser.test_start,
    "entry": _StreamParser.entry,
    "test_end": _StreamParser.test_end,
    "collected": _StreamParser.collected,
    "collect_error": _StreamParser.collect_error,
    "violation": _StreamParser.violation,
    "end": _StreamParser.end,
}


def _decode_events(pending: list[tuple[int, bytes]], events: list[dict]) -> None:
    """The pending event lines checked, in C where each needs nothing else (`fast_event`); else every line
    decoded (the first that is not JSON names the error), then each checked in order."""
    start = len(events)
    try:
        checked = [fast_event(raw, start + offset) for offset, (_, raw) in enumerate(pending)]
    except REFUSED:
        values = [decode_line(raw, number) for number, raw in pending]
        for (number, raw), value in zip(pending, values, strict=True):
            events.append(parse_decoded_event(value, raw, number, len(events), f"line {number}: "))
        return
    events.extend(checked)


def _entry(value: dict, events: list[dict], number: int) -> dict:
    where = f"line {number}: entry"
    for name in ("frame", "start", "n", "end", "firstlineno"):
        require(_int(value.get(name)), f"{where}: bad {name}")
    start, n, end = value["start"], value["n"], value["end"]
    require(n >= 1 and start + n <= end <= len(events), f"{where}: range {start}+{n}..{end} outside the test")
    require(value.get("exit") in EXITS and type(value.get("truncated")) is bool, f"{where}: bad exit")
    require(_opt_str(value.get("reason"), 200), f"{where}: bad reason")
    require(_int(value.get("capped", 0)), f"{where}: bad capped")
    require(not value["truncated"] or value["exit"] == "never", f"{where}: truncated but exit is not never")
    require(value["truncated"] or "ranges" in value or start + n == end, f"{where}: complete but its range is cut")
    path = value.get("path")
    require(
        isinstance(path, str) and 0 < len(path) <= 1000 and not os.path.isabs(path) and ".." not in path.split("/"),
        f"{where}: bad path",
    )
    require(isinstance(value.get("qualname"), str) and len(value["qualname"]) <= 1000, f"{where}: bad qualname")
    require(isinstance(value.get("input"), str) and len(value["input"]) <= 100_000, f"{where}: bad input")
    first = events[start]
    require(first["event"] == "call" and first["frame_id"] == value["frame"], f"{where}: does not start at its call")
    if "ranges" in value:
        last_start, last_n = _ranges(value, events, where)
        require(value["truncated"] or last_start + last_n == end, f"{where}: complete but its last range is cut")
    if not value["truncated"]:
        last = events[end - 1]
        expected = "return" if value["exit"] == "normal" else "exception"
        require(
            last["frame_id"] == value["frame"] and last["event"] == expected,
            f"{where}: does not end with its {expected}",
        )
    return value


def _ranges(value: dict, events: list[dict], where: str) -> tuple[int, int]:
    """Check a generator entry's `ranges`: [start, n] per activation of its frame, the first at the entry's
    start, in order and apart, within its `end`, together its `n` events; each starts with its frame's `call`
    and each but the last ends with its yield (a `return`). Returns the last range."""
    ranges, frame, n = value["ranges"], value["frame"], value["n"]
    require(type(ranges) is list and 2 <= len(ranges) <= n, f"{where}: ranges must be 2 to n={n} [start, n] pairs")
    pairs: list = ranges
    for position, pair in enumerate(pairs):
        require(
            type(pair) is list and len(pair) == 2 and _int(pair[0]) and _int(pair[1]) and pair[1] != 0,
            f"{where}: range {position} is not a [start, n] pair",
        )
    total, after = 0, value["start"]
    for position, (start, count) in enumerate(cast(list[tuple[int, int]], pairs)):
        require(position > 0 or start == after, f"{where}: its first range starts at {start}, not at its start {after}")
        require(
            start >= after, f"{where}: range {position} starts at {start}, before {after}: out of order or overlapping"
        )
        require(start + count <= value["end"], f"{where}: range {position} ends past the entry's end")
        first, last = events[start], events[start + count - 1]
        require(
            first["event"] == "call" and first["frame_id"] == frame,
            f"{where}: range {position} does not start with its frame's call",
        )
        require(
            position == len(pairs) - 1 or (last["event"] == "return" and last["frame_id"] == frame),
            f"{where}: range {position} does not end with its frame's yield",
        )
        total += count
        after = start + count
    require(total == n, f"{where}: its ranges hold {total} events, not n={n}")
    return after - count, count
