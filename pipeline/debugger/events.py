"""One trace, normalised once into column lists: the input every debugger function reads.

A trace arrives as a `traces` row from `pyarrow.Table.to_pylist()` (event `locals` as a list of
`{"name", "value"}` entries), as a stage wrote it (a list of `(name, repr)` pairs) or as
`tracers.trace.backends.trace_source` output (`locals` as a dict). `Trace.from_row` accepts all three, checks the
shape the state trees rely on, and raises `TraceShapeError` (a ValueError with a machine-readable
`error_type`) for a trace no debugger can walk; it never raises anything else for bad data.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from schemas.fields import named_pairs

EVENT_KINDS = frozenset({"call", "line", "return", "exception"})
EXITS = frozenset({"normal", "error", "never"})
_STR = frozenset({str})


class TraceShapeError(ValueError):
    """The trace cannot be turned into state trees; `error_type` names why (for the failures table)."""

    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type


class LazyColumn(Sequence):
    """A per-event value converted (and checked) on first access: only the states a trajectory shows
    need their locals and args, so a trace is not converted event by event up front."""

    __slots__ = ("_events", "_convert", "_cache")

    def __init__(self, events: list, convert):
        self._events = events
        self._convert = convert
        self._cache: dict = {}

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, index: int):
        try:
            return self._cache[index]
        except KeyError:
            if not 0 <= index < len(self._events):
                raise IndexError(index) from None
            value = self._cache[index] = self._convert(self._events[index], index)
            return value

    def __iter__(self):
        return (self[index] for index in range(len(self._events)))


@dataclass(frozen=True, eq=False)
class Trace:
    """Events of one trace as parallel columns (index i = event i), plus what the rows need.

    kinds, frames and sources are checked for every event when the trace is built; locals, args,
    functions and line numbers are converted and checked when first read (a bad one raises
    TraceShapeError then).
    """

    trace_id: str
    source_id: str
    source_kind: str
    code: str
    exit: str
    kinds: list[str]
    frames: list[int]
    sources: list[str]
    locals: Sequence[dict[str, str]]
    args: Sequence[str | None]
    functions: Sequence[str]
    linenos: Sequence[int]

    def __len__(self) -> int:
        return len(self.kinds)

    @cached_property
    def _code_lines(self) -> dict[str, int]:
        lines: dict[str, int] = {}
        for index, line in enumerate(self.code.split("\n")):
            lines.setdefault(line, index)
        return lines

    def code_line(self, source: str) -> int:
        """The index of the first code line whose text is `source` exactly; -1 when there is none."""
        return self._code_lines.get(source, -1)

    @classmethod
    def from_row(cls, row: dict, trace_id: str | None = None) -> "Trace":
        """Normalise a `traces` row (or `trace_source` output); raises TraceShapeError on a bad shape."""
        if not isinstance(row, dict):
            raise TraceShapeError("MalformedTrace", f"a trace row must be a dict, not {type(row).__name__}")
        events = row.get("events")
        if not isinstance(events, list):
            raise TraceShapeError("MalformedTrace", "the trace has no `events` list")
        exit_ = row.get("exit")
        if exit_ not in EXITS:
            raise TraceShapeError("MalformedTrace", f"exit {exit_!r} is not one of normal|error|never")
        if not events:
            raise TraceShapeError(
                "EmptyTrace",
                "the trace has no events: nothing ran under the tracer "
                "(e.g. the entry is a generator function that was never iterated)",
            )
        try:
            kinds = [event["event"] for event in events]
            frames = [event["frame_id"] for event in events]
            sources = [event["source"] for event in events]
        except (TypeError, KeyError, IndexError):
            raise TraceShapeError(
                "MalformedTrace", "an event is not a struct with event, frame_id and source"
            ) from None
        if not EVENT_KINDS.issuperset(kinds):
            position = next(i for i, kind in enumerate(kinds) if kind not in EVENT_KINDS)
            raise TraceShapeError("MalformedTrace", f"event {position}: unknown event type {kinds[position]!r}")
        for name, column, expected in (("frame_id", frames, int), ("source", sources, str)):
            if not {expected}.issuperset(map(type, column)):
                position = next(i for i, value in enumerate(column) if type(value) is not expected)
                raise TraceShapeError(
                    "MalformedTrace",
                    f"event {position}: {name} {column[position]!r} is not "
                    f"a{'n' if expected is int else ''} {expected.__name__}",
                )
        if kinds[0] != "call":
            raise TraceShapeError("MalformedTrace", f"the first event is {kinds[0]!r}, not the entry call")
        return cls(
            trace_id=str(trace_id or row.get("trace_id") or ""),
            source_id=str(row.get("source_id") or ""),
            source_kind=str(row.get("source_kind") or "function"),
            code=str(row.get("code") or ""),
            exit=exit_,
            kinds=kinds,
            frames=frames,
            sources=sources,
            locals=LazyColumn(events, _locals_of),
            args=LazyColumn(events, _arg_of),
            functions=LazyColumn(events, lambda event, _: str(event.get("function"))),
            linenos=LazyColumn(events, lambda event, _: event.get("lineno")),
        )


def _arg_of(event: dict, position: int) -> str | None:
    arg = event.get("arg")
    if arg is not None and type(arg) is not str:
        raise TraceShapeError("MalformedTrace", f"event {position}: arg {arg!r} is not a string")
    return arg


def _locals_of(event: dict, position: int) -> dict[str, str]:
    """Arrow entries (`{"name", "value"}` dicts), (name, repr) pairs or a dict -> dict of name -> repr."""
    value = event.get("locals")
    try:
        local_map = dict(named_pairs(value)) if value is not None else {}
    except (KeyError, TypeError, ValueError):
        raise TraceShapeError("MalformedTrace", f"event {position}: locals are not (name, repr) pairs") from None
    if not (_STR.issuperset(map(type, local_map)) and _STR.issuperset(map(type, local_map.values()))):
        raise TraceShapeError("MalformedTrace", f"event {position}: locals are not (name, repr) pairs")
    if ".." in local_map:
        raise TraceShapeError("MalformedTrace", f"event {position}: a local named '..' (not a Python name)")
    return local_map
