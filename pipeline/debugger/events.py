"""One trace, normalised once into column lists: the input every debugger function reads.

A trace arrives as a `traces` row from `pyarrow.Table.to_pylist()` (event `locals` as a list of
`(name, repr)` pairs) or as `tracers.pytrace.trace_source` output (`locals` as a dict). `Trace.from_row`
accepts both, checks the shape the state trees rely on, and raises `TraceShapeError` (a ValueError with
a machine-readable `error_type`) for a trace no debugger can walk; it never raises anything else for
bad data.
"""

from dataclasses import dataclass

EVENT_KINDS = frozenset({"call", "line", "return", "exception"})
EXITS = frozenset({"normal", "error", "never"})


class TraceShapeError(ValueError):
    """The trace cannot be turned into state trees; `error_type` names why (for the failures table)."""

    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type


@dataclass(frozen=True, eq=False)
class Trace:
    """Events of one trace as parallel lists (index i = event i), plus what the rows need."""

    trace_id: str
    source_id: str
    source_kind: str
    code: str
    exit: str
    kinds: list[str]
    frames: list[int]
    functions: list[str]
    linenos: list[int]
    sources: list[str]
    locals: list[dict[str, str]]
    args: list[str | None]

    def __len__(self) -> int:
        return len(self.kinds)

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
            raise TraceShapeError("EmptyTrace", "the trace has no events: nothing ran under the tracer "
                                  "(e.g. the entry is a generator function that was never iterated)")
        kinds, frames, functions, linenos, sources, local_maps, args = [], [], [], [], [], [], []
        for position, event in enumerate(events):
            try:
                kind, frame, source, arg = event["event"], event["frame_id"], event["source"], event.get("arg")
                local_pairs = event.get("locals")
            except (TypeError, KeyError, AttributeError):
                raise TraceShapeError("MalformedTrace", f"event {position} is not a struct with event, "
                                      f"frame_id and source") from None
            if kind not in EVENT_KINDS:
                raise TraceShapeError("MalformedTrace", f"event {position}: unknown event type {kind!r}")
            if type(frame) is not int:
                raise TraceShapeError("MalformedTrace", f"event {position}: frame_id {frame!r} is not an int")
            if type(source) is not str or not (arg is None or type(arg) is str):
                raise TraceShapeError("MalformedTrace", f"event {position}: source/arg are not strings")
            kinds.append(kind)
            frames.append(frame)
            functions.append(event.get("function"))
            linenos.append(event.get("lineno"))
            sources.append(source)
            local_maps.append(_locals_of(local_pairs, position))
            args.append(arg)
        if kinds[0] != "call":
            raise TraceShapeError("MalformedTrace", f"the first event is {kinds[0]!r}, not the entry call")
        return cls(trace_id=str(trace_id or row.get("trace_id") or ""), source_id=str(row.get("source_id") or ""),
                   source_kind=str(row.get("source_kind") or "function"), code=str(row.get("code") or ""),
                   exit=exit_, kinds=kinds, frames=frames, functions=functions, linenos=linenos,
                   sources=sources, locals=local_maps, args=args)


def _locals_of(value, position: int) -> dict[str, str]:
    """Arrow map (list of pairs) or dict -> dict of name -> repr."""
    try:
        local_map = dict(value) if value is not None else {}
    except (TypeError, ValueError):
        raise TraceShapeError("MalformedTrace", f"event {position}: locals are not (name, repr) pairs") from None
    for name, text in local_map.items():
        if type(name) is not str or type(text) is not str:
            raise TraceShapeError("MalformedTrace", f"event {position}: locals are not (name, repr) pairs")
    return local_map
