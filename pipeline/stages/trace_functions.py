"""Stage: trace function records in the sandbox and turn the tracer's output into `traces` rows.

All records of a chunk go to one sandboxed runner (tracers/runners/functions.py), which runs a child per
record, kills whatever the record left behind before the next one starts, and sends each finished record
over its stdout, framed (`pipeline/stages/runnerstream.py`): so no record can touch what an earlier one
produced. If the sandbox itself dies or is killed at the chunk's wall clock (the runner killed, stopped or
crashed), the record the runner was on is blamed with a failure row, the finished ones are kept, and the
rest run again in a fresh sandbox: one bad record never costs another. A record that fills the sandbox's
size-capped scratch filesystem is stopped and gets a failure row (`ScratchLimitExceeded`).

With `check_parity` each record whose traced call ended by itself is also run untraced (a fresh child);
its return value or exception, rendered the same way, must equal the traced one. A record where they
differ keeps its trace with `perturbed=true` and gets a failure row (stage `trace`, `OutcomePerturbed`).

What the sandbox sends is untrusted, and judged one record at a time: the strict parser checks every type
and size and makes every string valid Unicode (`pipeline/stages/tracefile.py`), and a record whose trace is
missing, replaced or malformed gets its own failure row; the records beside it are unaffected.
"""

import hashlib
from dataclasses import asdict, dataclass, field

from pipeline.engine.config import Option, setting
from pipeline.engine.failures import Failure, Failures, Input
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.sandbox import Sandbox
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.runner_session import Blamed, warm_session
from pipeline.stages.runnerstream import RecordOutput
from pipeline.stages.tracefile import (
    ParsedTrace,
    TraceFormatError,
    json_bytes,
    parse_parity_file,
    parse_trace_file,
)
from tracers.trace.backends import CHOICES as TRACER_BACKENDS

REPR_MODES = ("structural", "user")
TRACER_BACKEND = Option(
    "--tracer-backend",
    "how the tracer gets its events: sys.monitoring (CPython 3.12+, much cheaper where nothing is recorded) or "
    "sys.settrace; auto takes sys.monitoring where the interpreter has it",
    choices=TRACER_BACKENDS,
)


@dataclass(frozen=True)
class ReprLimits:
    """Caps on one value's repr (tracers/reprs/saferepr.py): characters, container items, nesting depth; and how
    objects are rendered: `structural` (from their state, no program code run) or `user` (their own
    `__repr__`, for corpora where it is known to be pure).

    The defaults keep a typical local whole (a short string, a small list or dict, an object of a few
    fields nested a few levels: what a model can read at every step of a trace) while one huge value costs
    at most ~200 characters per local per event, so the byte budget goes to events, not to one value.
    A capped value is marked `…` (schemas/reprs.md) and counted in `traces.n_capped_values`."""

    max_chars: int = setting(
        200,
        Option(
            "--max-repr-chars",
            "cap on the characters of one value's repr; a longer one is cut and marked …, see schemas/reprs.md",
        ),
    )
    max_items: int = setting(20, Option("--max-repr-items", "cap on the items shown per container, fields per object"))
    max_depth: int = setting(4, Option("--max-repr-depth", "cap on the levels of nested containers shown"))
    mode: str = setting(
        "structural",
        Option(
            "--repr-mode",
            "how values of the program's classes are rendered: structural, from their state with no program code "
            "run; or user, their own __repr__, only for code known to have pure reprs",
            choices=REPR_MODES,
        ),
    )

    def __post_init__(self):
        for name, least in (("max_chars", 8), ("max_items", 1), ("max_depth", 1)):
            if type(getattr(self, name)) is not int or getattr(self, name) < least:
                raise ValueError(f"{name} must be an int of at least {least}, got {getattr(self, name)!r}")
        if self.mode not in REPR_MODES:
            raise ValueError(f"repr mode must be one of {', '.join(REPR_MODES)}, got {self.mode!r}")

    def request(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TraceSettings:
    """Budgets of one function trace and its repr caps, handed to the tracer, plus the per-record wall-clock
    kill."""

    max_events: int = setting(10_000, Option("--max-events", "events per trace"))
    max_bytes: int = 8 << 20
    max_seconds: float = setting(5.0, Option("--max-seconds", "the tracer's time budget per record"))
    record_timeout_s: float = setting(
        10.0, Option("--record-timeout", "wall-clock kill per record (above --max-seconds)")
    )
    reprs: ReprLimits = field(default_factory=ReprLimits)
    check_parity: bool = setting(
        False,
        Option(
            "--check-parity",
            "run each record once more untraced and flag traces whose return value or exception differs",
            action="store_true",
        ),
    )
    tracer_backend: str = setting("auto", TRACER_BACKEND)

    def __post_init__(self):
        check_tracer_backend_name(self.tracer_backend)
        if self.max_events < 1 or self.max_bytes < 1 or self.max_seconds <= 0:
            raise ValueError("max_events, max_bytes and max_seconds must be positive")
        if self.record_timeout_s <= self.max_seconds:
            raise ValueError(
                "record_timeout_s must exceed max_seconds, so the tracer's own budget ends "
                "a slow trace before the wall-clock kill does"
            )

    def runner_config(self) -> dict:
        """The runner's `config` command (tracers/runners/functions.py)."""
        return {
            "budgets": {"max_events": self.max_events, "max_bytes": self.max_bytes, "max_seconds": self.max_seconds},
            "limits": self.reprs.request(),
            "record_timeout_s": self.record_timeout_s,
            "check_parity": self.check_parity,
            "tracer_backend": self.tracer_backend,
        }


def check_tracer_backend_name(name: str) -> None:
    """A ValueError naming the choices, for a tracer backend that is none of them."""
    if name not in TRACER_BACKENDS:
        raise ValueError(f"tracer_backend must be one of {', '.join(TRACER_BACKENDS)}, got {name!r}")


def trace_id(record: FunctionRecord, events: list[dict], exit_: str) -> str:
    """Content hash of what was traced and what happened."""
    payload = json_bytes([record.code, record.entry, record.input, exit_, events], sort_keys=True)
    return hashlib.sha256(payload).hexdigest()[:32]


def trace_row(record: FunctionRecord, parsed, repr_mode: str, perturbed: bool | None = None) -> dict:
    end = parsed.end
    events = parsed.events
    exit_ = end["exit"]
    return {
        "trace_id": trace_id(record, events, exit_),
        "source_id": record.id,
        "source_kind": "function",
        "repo_url": None,
        "commit": None,
        "path": None,
        "qualname": record.entry,
        "test_id": None,
        "code": record.code,
        "input": record.input,
        "python_version": str(parsed.header.get("python")),
        "tracer_version": str(parsed.header.get("tracer_version")),
        "exit": exit_,
        "truncated": bool(end["truncated"]),
        "truncation_reason": end.get("reason") if end["truncated"] else None,
        "n_events": len(events),
        "n_capped_values": end.get("n_capped", 0),
        "events": events,
        "repr_mode": repr_mode,
        "perturbed": perturbed,
    }


def trace_functions(
    records: list[FunctionRecord], sandbox: Sandbox, settings: TraceSettings, unit_id: str
) -> StageOutput:
    """Trace every record: `traces` and `failures` rows in record order, and the `trace` counters."""
    counters = StageCounters("trace")
    counters.n_in = len(records)
    rows: list[dict] = []
    failures = Failures(unit_id)
    with counters.timed():
        session = warm_session(sandbox, settings)
        for record in records:
            about = Input(record.id, record.input_ref, f"record {record.id!r}")
            output = session.trace(record)
            if isinstance(output, Blamed):
                failures.add(about, _blame(output), counters)
                continue
            parsed = _parse(output, settings.max_events)
            if isinstance(parsed, Failure):
                failures.add(about, parsed, counters)
                continue
            perturbed = _compare(parsed, output.parity) if settings.check_parity else None
            if isinstance(perturbed, Failure):
                failures.add(about, perturbed, counters)
                perturbed = True
            rows.append(trace_row(record, parsed, settings.reprs.mode, perturbed))
    counters.n_out = len(rows)
    counters.events = sum(row["n_events"] for row in rows)
    return StageOutput({"traces": rows, "failures": failures.rows}, {"trace": counters})


def _blame(blamed: Blamed) -> Failure:
    """The failure of the record the runner was on when its sandbox ended (or that two fresh sandboxes ended
    before starting it)."""
    if blamed.started:
        why = f"the runner died or was stopped while this record ran ({blamed.result.describe()})"
    else:
        why = f"the sandbox ended twice before this record started ({blamed.result.describe()})"
    return Failure(
        "sandbox",
        "SandboxFailed",
        f"{why}; the records after it run in a fresh sandbox",
        blamed.result.stderr_tail.decode("utf-8", "replace") or None,
    )


def _parse(output: RecordOutput, max_events: int) -> ParsedTrace | Failure:
    """The record's parsed trace, or why there is none: the record filled the scratch, its trace file is
    missing or malformed, or its code or input failed before the call."""
    if output.scratch_full:
        return Failure(
            "trace",
            "ScratchLimitExceeded",
            "it filled the sandbox's scratch filesystem and was stopped; "
            "write less than the sandbox's file_bytes limit",
        )
    data = output.closed_trace()
    if data is None:
        return Failure(
            "parse",
            "MissingTraceOutput",
            "its trace file is missing or is not a regular file (a link, a directory, a FIFO); the traced code may "
            "have removed or replaced it",
        )
    try:
        parsed = parse_trace_file(data, max_events)
    except TraceFormatError as error:
        return Failure(
            "parse",
            "BadTraceOutput",
            f"the tracer's output is malformed ({error}); the traced code may have written to the trace file",
        )
    if parsed.failure is not None:
        return _setup_failure(parsed.failure)
    return parsed


def _setup_failure(failure: dict) -> Failure:
    """The tracer's report that the record's input (stage `input`) or its code or entry (`setup`) failed."""
    error_type = failure["error_type"]
    if failure.get("stage") == "input":
        stage, doing, hint = (
            "input",
            "evaluating the input",
            "fix the record's input (the argument text of entry(<input>))",
        )
    else:
        stage, doing, hint = "setup", "loading the code", "fix the record's code or entry"
    return Failure(stage, error_type, f"{error_type} while {doing}: {failure['message'][:2000]}; {hint}")


def _compare(parsed, parity: bytes | None) -> bool | None | Failure:
    """Whether the untraced call ended otherwise than the traced one: False, or the failure saying how (the
    trace is kept, perturbed); None when there is nothing to compare (the trace was cut, or the untraced run
    left no valid result)."""
    end = parsed.end
    traced = end.get("result")
    if end["exit"] == "never" or type(traced) is not str or parity is None:
        return None
    try:
        untraced = parse_parity_file(parity)
    except TraceFormatError:
        return None
    if (untraced["exit"], untraced["result"]) == (end["exit"], traced):
        return False
    return Failure(
        "trace",
        "OutcomePerturbed",
        f"the traced call ended with {end['exit']} {traced[:300]}, the untraced one with "
        f"{untraced['exit']} {untraced['result'][:300]}; the code depends on the tracer (or is not "
        f"deterministic); its trace is kept with perturbed=true",
    )
