"""The `traces` table: one row per traced entry call.

Values (`events[].locals`, `events[].arg`) are bounded reprs made without running the program's code:
builtin values in CPython's exact repr, other objects rendered from their state, e.g. `Point(x=1, y=2)`
(`repr_mode` `structural`, the default; rules and examples in [reprs.md](reprs.md)). `perturbed` says
whether the traced execution is the one that happens without the tracer: the traced code was run once
more untraced and its outcome compared.
"""

import pyarrow as pa

from schemas.fields import field, named_values

VERSION = 4

EVENT = pa.struct(
    [
        field("index", pa.int32(), "position of the event in the trace, from 0", nullable=False),
        field("event", pa.string(), "call | line | return | exception", nullable=False),
        field(
            "frame_id",
            pa.int32(),
            "id of the frame, by order of first call; a generator keeps its id across resumes",
            nullable=False,
        ),
        field("parent_frame_id", pa.int32(), "nearest traced caller frame; null for the entry frame"),
        field(
            "depth",
            pa.int32(),
            "number of traced frames below this one on the stack, from the entry frame (0); a generator entry's "
            "frame is 0 at each of its activations",
            nullable=False,
        ),
        field("lineno", pa.int32(), "line number in the traced source", nullable=False),
        field("function", pa.string(), "qualified name of the frame's code object", nullable=False),
        field("source", pa.string(), "exact text of the line (the def line for a call)", nullable=False),
        field(
            "locals",
            named_values(pa.string()),
            "the frame's locals as (name, value) entries, value a bounded repr (schemas/reprs.md), in frame "
            "order: arguments at a call, the state before the line runs at a line event",
            nullable=False,
        ),
        field(
            "arg",
            pa.string(),
            "return value repr (return), exception as `Type(args...)` (exception; never its __str__), else null",
        ),
    ]
)

SCHEMA = pa.schema(
    [
        field("trace_id", pa.string(), "content hash of the source and the events (hex)", nullable=False),
        field("source_id", pa.string(), "the input record's id, or repo@commit:path:qualname", nullable=False),
        field("source_kind", pa.string(), "function | repo", nullable=False),
        field("repo_url", pa.string(), "repository URL (repo traces)"),
        field("commit", pa.string(), "commit SHA (repo traces)"),
        field("path", pa.string(), "file path in the repository (repo traces)"),
        field("qualname", pa.string(), "qualified name of the entry function", nullable=False),
        field("test_id", pa.string(), "pytest node id of the test that made the call (repo traces)"),
        field(
            "code",
            pa.string(),
            "entry code context: the record's source, or the entry function's source",
            nullable=False,
        ),
        field("input", pa.string(), "argument text of the entry call `entry(<input>)`"),
        field("python_version", pa.string(), "CPython version that ran the trace", nullable=False),
        field(
            "tracer_version",
            pa.string(),
            "version of tracers/trace/tracer.py; `+monitoring` when the sys.monitoring backend recorded it "
            "(CPython 3.12+, tracers/trace/monitoring.py: the same events as sys.settrace), e.g. `6+monitoring`",
            nullable=False,
        ),
        field(
            "exit",
            pa.string(),
            "normal | error (uncaught exception) | never (a budget ran out, or the repository test ended first: "
            "a generator it left suspended)",
            nullable=False,
        ),
        field("truncated", pa.bool_(), "true when the trace ended before the call did", nullable=False),
        field(
            "truncation_reason",
            pa.string(),
            "max_events | max_bytes | max_seconds | wall_time_kill | threads (code ran in another thread: the "
            "trace holds the entry thread only) | tampered:<event> | tracer_disabled | time_share (repository "
            "suites: the test's share of the run's time to record in was spent) | test_ended (repository suites: the "
            "test ended before the call did, e.g. a generator it left suspended) | ...; null unless truncated",
        ),
        field("n_events", pa.int32(), "number of events", nullable=False),
        field(
            "n_capped_values",
            pa.int32(),
            "values in the events that a repr cap cut (characters, items, depth; their text holds the mark `…`, "
            "reprs.md); 0 when every value is whole",
            nullable=False,
        ),
        field(
            "repr_mode",
            pa.string(),
            "how values were rendered: structural (from their state, no program code run; the default) | "
            "user (the objects' own __repr__, a per-job option)",
            nullable=False,
        ),
        field(
            "perturbed",
            pa.bool_(),
            "true when the outcome differs untraced (repo: the test's outcome in an untraced run of the suite; "
            "function, with --check-parity: the return value or exception of an untraced call), false when it "
            "is the same; null when not checked (no parity run, or the trace was cut)",
        ),
        field(
            "events",
            pa.list_(pa.field("item", EVENT, nullable=False)),
            "the events in recorded order; the first is the entry call. A generator function's entry (repo "
            "traces): every activation of its frame in turn, its call then each resume, each up to its yield or "
            "its end, all at the root level",
            nullable=False,
        ),
    ]
)
