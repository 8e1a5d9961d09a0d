"""Stage: trace function records in the sandbox and turn the tracer's output into `traces` rows.

All records of a chunk go to one sandboxed runner, which forks a child per record. If the sandbox
itself dies (wall clock, a crash), the first record without a complete trace is blamed with a failure
row and the rest are run again in a fresh sandbox: one bad record never costs another.

With `check_parity` each record whose traced call ended by itself is also run untraced (a fresh child);
its return value or exception, rendered the same way, must equal the traced one. A record where they
differ keeps its trace with `perturbed=true` and gets a failure row (stage `trace`, `OutcomePerturbed`).

What the sandbox leaves is untrusted, and judged one record at a time: the host reads each record's files
through the output directory's descriptor (`SandboxDirectory`), the strict parser checks every type and
size and makes every string valid Unicode (`pipeline/stages/tracefile.py`), and a record whose files are
missing, replaced or malformed gets its own failure row; the records beside it are unaffected.
"""

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field

from pipeline.engine.failures import failure_row
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.sandbox import Bind, Sandbox, SandboxLimits
from pipeline.sandbox.files import SandboxDirectory
from pipeline.sandbox.tracers import TRACERS_PARENT, tracers_bind
from pipeline.sources.functions import FunctionRecord
from pipeline.stages.tracefile import TraceFormatError, parse_parity_file, parse_trace_file

REPR_MODES = ("structural", "user")


@dataclass(frozen=True)
class ReprLimits:
    """Caps on one value's repr (tracers/saferepr.py): characters, container items, nesting depth; and how
    objects are rendered: `structural` (from their state, no program code run) or `user` (their own
    `__repr__`, for corpora where it is known to be pure)."""

    max_chars: int = 200
    max_items: int = 20
    max_depth: int = 4
    mode: str = "structural"

    def __post_init__(self):
        for name in ("max_chars", "max_items", "max_depth"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if self.mode not in REPR_MODES:
            raise ValueError(f"repr mode must be one of {', '.join(REPR_MODES)}, got {self.mode!r}")

    def request(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TraceSettings:
    """Budgets of one function trace and its repr caps, handed to the tracer, plus the per-record wall-clock
    kill."""

    max_events: int = 10_000
    max_bytes: int = 8 << 20
    max_seconds: float = 5.0
    record_timeout_s: float = 10.0
    reprs: ReprLimits = field(default_factory=ReprLimits)
    check_parity: bool = False

    def __post_init__(self):
        if self.max_events < 1 or self.max_bytes < 1 or self.max_seconds <= 0:
            raise ValueError("max_events, max_bytes and max_seconds must be positive")
        if self.record_timeout_s <= self.max_seconds:
            raise ValueError(
                "record_timeout_s must exceed max_seconds, so the tracer's own budget ends "
                "a slow trace before the wall-clock kill does"
            )

    def request(self, records: list[FunctionRecord]) -> dict:
        return {
            "records": [record.request() for record in records],
            "budgets": {"max_events": self.max_events, "max_bytes": self.max_bytes, "max_seconds": self.max_seconds},
            "limits": self.reprs.request(),
            "record_timeout_s": self.record_timeout_s,
            "check_parity": self.check_parity,
        }


def trace_id(record: FunctionRecord, events: list[dict], exit_: str) -> str:
    """Content hash of what was traced and what happened."""
    payload = json.dumps(
        [record.code, record.entry, record.input, exit_, events], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


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
    rows: dict[int, dict] = {}
    failures: dict[int, dict] = {}
    with counters.timed():
        pending = list(range(len(records)))
        while pending:
            result, outputs = _run_sandbox([records[i] for i in pending], sandbox, settings)
            # When the sandbox died, the last trace file it left may be incomplete: that record is blamed.
            left = next((position for position, output in enumerate(outputs) if output[0] is None), len(outputs))
            complete = len(outputs) if result.ok else max(0, left - 1)
            for position in range(complete):
                index = pending[position]
                _collect(records[index], outputs[position], settings, unit_id, rows, failures, index)
            if complete == len(pending):
                break
            blamed = pending[complete]
            record = records[blamed]
            failures[blamed] = failure_row(
                unit_id,
                record.id,
                "sandbox",
                "SandboxFailed",
                f"record {record.id!r}: the sandbox ended before this record finished ({result.describe()})",
                record.input_ref,
                result.stderr_tail.decode("utf-8", "replace") or None,
            )
            pending = pending[complete + 1 :]
    counters.n_out = len(rows)
    counters.events = sum(row["n_events"] for row in rows.values())
    for failure in failures.values():
        counters.drop(failure["error_type"])
    return StageOutput(
        {"traces": [rows[i] for i in sorted(rows)], "failures": [failures[i] for i in sorted(failures)]},
        {"trace": counters},
    )


def _collect(record, output, settings, unit_id, rows, failures, index) -> None:
    data, parity = output
    if data is None:
        failures[index] = failure_row(
            unit_id,
            record.id,
            "parse",
            "MissingTraceOutput",
            f"record {record.id!r}: its trace file is missing or is not a regular file (a link, a directory, a "
            f"FIFO); the traced code may have removed or replaced it",
            record.input_ref,
        )
        return
    try:
        parsed = parse_trace_file(data, settings.max_events)
    except TraceFormatError as error:
        failures[index] = failure_row(
            unit_id,
            record.id,
            "parse",
            "BadTraceOutput",
            f"record {record.id!r}: the tracer's output is malformed ({error}); "
            f"the traced code may have written to the trace file",
            record.input_ref,
        )
        return
    if parsed.failure is not None:
        failure = parsed.failure
        error_type = failure["error_type"]
        stage = "input" if failure.get("stage") == "input" else "setup"
        hint = {
            "input": "fix the record's input (the argument text of entry(<input>))",
            "setup": "fix the record's code or entry",
        }[stage]
        failures[index] = failure_row(
            unit_id,
            record.id,
            stage,
            error_type,
            f"record {record.id!r}: {error_type} while "
            f"{'evaluating the input' if stage == 'input' else 'loading the code'}: "
            f"{failure['message'][:2000]}; {hint}",
            record.input_ref,
        )
        return
    perturbed = None
    if settings.check_parity:
        perturbed = _compare(record, parsed, parity, unit_id, failures, index)
    rows[index] = trace_row(record, parsed, settings.reprs.mode, perturbed)


def _compare(record, parsed, parity, unit_id, failures, index) -> bool | None:
    """Whether the untraced call ended otherwise than the traced one; None when there is nothing to compare
    (the trace was cut, or the untraced run left no valid result). A difference is also a failure row."""
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
    failures[index] = failure_row(
        unit_id,
        record.id,
        "trace",
        "OutcomePerturbed",
        f"record {record.id!r}: the traced call ended with {end['exit']} {traced[:300]}, the untraced one with "
        f"{untraced['exit']} {untraced['result'][:300]}; the code depends on the tracer (or is not "
        f"deterministic); its trace is kept with perturbed=true",
        record.input_ref,
    )
    return True


def _run_sandbox(records: list[FunctionRecord], sandbox: Sandbox, settings: TraceSettings):
    """Run the runner over `records`; returns (SandboxResult, [(trace file bytes or None, parity file bytes or
    None) per record]).

    The output directory is made and opened here before the sandbox starts, and bound on its own, so inside the
    sandbox it is a mount point that cannot be renamed or replaced either.
    """
    scratch = tempfile.mkdtemp(prefix="tracegen-")
    try:
        with SandboxDirectory(os.path.join(scratch, "out")) as out:
            request = os.path.join(scratch, "request.json")
            with open(request, "w", encoding="utf-8") as handle:
                json.dump(settings.request(records), handle)
            limits = SandboxLimits(
                **{**asdict(sandbox.limits), "wall_s": settings.record_timeout_s * len(records) + 10.0}
            )
            result = sandbox.run(
                [sandbox.python, "-s", "-B", "-m", "tracers.function_runner", request, out.path],
                binds=[tracers_bind(), Bind(scratch, writable=True), Bind(out.path, writable=True)],
                env={"PYTHONPATH": TRACERS_PARENT, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"},
                cwd=scratch,
                limits=limits,
            )
            outputs = [
                (
                    out.read("%06d.trace" % position, settings.max_bytes + (1 << 20)),
                    out.read("%06d.parity" % position, 1 << 16) if settings.check_parity else None,
                )
                for position in range(len(records))
            ]
        return result, outputs
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
