"""The function-tracing kind: JSONL records → dedup → decontaminate → chunks → (trace, sample trajectories) per
Ray task."""

import functools
from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.engine.config import Option, setting
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.orchestrate import RayTasks, map_tasks
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.kinds.options import PythonConfig, check_tracer_backend
from pipeline.sandbox import check_sandbox, make_sandbox
from pipeline.sources.function_records import FunctionRecord, read_function_records
from pipeline.stages.decontaminate import Decontaminator, TraceCleaner, contaminated_row, counted
from pipeline.stages.dedup import DedupSettings, resolve_duplicates, signature_matrix, signatures
from pipeline.stages.dedup_distributed import ResolvePlan, resolve_distributed
from pipeline.stages.trace_functions import TraceSettings, trace_functions
from pipeline.stages.trajectories import SamplingSettings, sample_trajectories_stage

DEDUP_BATCH = 512
# From this many records on, the LSH resolution runs as Ray tasks by band (`resolve_distributed`), below it on the
# driver: the result is the same either way (pipeline/stages/dedup_distributed.py says why), only the cost differs.
DISTRIBUTED_DEDUP_FROM = 20_000
DEDUP_PLAN = ResolvePlan()  # the sizes of the distributed resolution's tasks (never its result)


@dataclass(frozen=True)
class Chunk:
    """A unit's payload: consecutive records; unit 0 also carries what the driver dropped before tracing
    (unreadable lines, near-duplicates, near-copies of benchmark items) and the counters of those driver-side
    stages."""

    records: list[FunctionRecord]
    read_failures: list[dict]
    duplicates: list[dict]
    counters: dict[str, StageCounters]
    contaminated: list[dict] = field(default_factory=list)


def find_duplicates(
    records: list[FunctionRecord], settings: DedupSettings
) -> tuple[list[FunctionRecord], list[dict], StageCounters]:
    """Kept records and `duplicates` rows: signatures in Ray tasks, then the serial resolution in record order,
    on the driver for a small file, as Ray tasks by band from DISTRIBUTED_DEDUP_FROM records on (the same
    result)."""
    counters = StageCounters("dedup")
    counters.n_in = len(records)
    if not settings.enabled or not records:
        counters.n_out = len(records)
        return records, [], counters
    with counters.timed():
        if len(records) >= DISTRIBUTED_DEDUP_FROM:
            duplicates = distributed_duplicates(records, settings)
        else:
            batches = [
                [(r.code, r.entry, r.input) for r in records[start : start + DEDUP_BATCH]]
                for start in range(0, len(records), DEDUP_BATCH)
            ]
            sigs = [
                sig for batch in map_tasks(functools.partial(signatures, settings=settings), batches) for sig in batch
            ]
            duplicates = resolve_duplicates(sigs, settings)
    rows = [
        {
            "unit_id": "",
            "source_id": records[position].id,
            "duplicate_of": records[kept].id,
            "similarity": float(similarity),
            "input_ref": records[position].input_ref,
        }
        for position, (kept, similarity) in sorted(duplicates.items())
    ]
    kept = [record for position, record in enumerate(records) if position not in duplicates]
    counters.n_out = len(kept)
    if rows:
        counters.drop("near_duplicate", len(rows))
    return kept, rows, counters


def distributed_duplicates(records: list[FunctionRecord], settings: DedupSettings) -> dict[int, tuple[int, float]]:
    """`resolve_duplicates` of the records' signatures, computed by Ray tasks: the signatures stay in the object
    store (no task and not the driver holds them all), band tasks find the buckets, resolve tasks the result."""
    tasks = RayTasks()
    batch = DEDUP_PLAN.signature_rows(len(records), tasks.parallelism)
    blocks = [
        (start, min(start + batch, len(records)), [(r.code, r.entry, r.input) for r in records[start : start + batch]])
        for start in range(0, len(records), batch)
    ]
    make = functools.partial(signature_matrix, settings=settings)
    duplicates, _ = resolve_distributed(blocks, make, settings, tasks, DEDUP_PLAN)
    return duplicates


def match_batch(records: list[FunctionRecord], decontaminator: Decontaminator) -> list:
    """Each record's benchmark match or None (the part that runs in the workers: signatures and n-grams)."""
    return [decontaminator.match(r.code, r.input, r.output) for r in records]


def decontaminate(
    records: list[FunctionRecord], decontaminator: Decontaminator
) -> tuple[list[FunctionRecord], list[dict], StageCounters]:
    """Kept records and `contaminated` rows: every record matched against the benchmark items in Ray tasks
    (DEDUP_BATCH records a task; the decontaminator, small, is shipped once), the rows in record order."""
    if not records:
        return records, [], counted(0, [])
    started = StageCounters("decontaminate")
    with started.timed():
        batches = [records[start : start + DEDUP_BATCH] for start in range(0, len(records), DEDUP_BATCH)]
        found = functools.partial(match_batch, decontaminator=decontaminator)
        matches = [match for batch in map_tasks(found, batches) for match in batch]
    kept, rows = [], []
    for record, match in zip(records, matches, strict=True):
        if match is None:
            kept.append(record)
        else:
            rows.append(contaminated_row(match, "", "function_records", record.id, record.id))
    counters = counted(len(records), rows)
    counters.seconds = started.seconds
    return kept, rows, counters


def read_counted(path: str) -> tuple[list[FunctionRecord], list[dict], StageCounters]:
    """The file's records, the failure rows of its unreadable lines, and the `read` stage's counters."""
    records, read_failures = read_function_records(path)
    read = StageCounters("read")
    read.n_in, read.n_out = len(records) + len(read_failures), len(records)
    for row in read_failures:
        read.drop(row["error_type"])
    return records, read_failures, read


def drop_keys(read_failures: list[dict], duplicates: list[dict], contaminated: list[dict]) -> list[list]:
    """What names the driver's drops in a unit's fingerprint or key; the contaminated part only when there are
    some, so a unit without them keeps the fingerprint it had before decontamination existed."""
    keys: list[list] = [
        [(row["input_ref"], row["message"]) for row in read_failures],
        [(row["source_id"], row["duplicate_of"]) for row in duplicates],
    ]
    if contaminated:
        keys.append([(row["dropped_id"], row["item_id"], row["rule"]) for row in contaminated])
    return keys


def chunk_units(
    records: list[FunctionRecord],
    read_failures: list[dict],
    duplicates: list[dict],
    counters: dict[str, StageCounters],
    chunk_size: int,
    contaminated: list[dict],
) -> list[Unit]:
    """Consecutive records in file order, `chunk_size` a unit; unit 0 carries the driver's drops."""
    chunks = [records[start : start + chunk_size] for start in range(0, len(records), chunk_size)] or [[]]
    units = []
    for index, chunk in enumerate(chunks):
        unit_id = f"functions-{index:05d}"
        if index == 0:
            payload = Chunk(
                chunk,
                [dict(row, unit_id=unit_id) for row in read_failures],
                [dict(row, unit_id=unit_id) for row in duplicates],
                counters,
                [dict(row, unit_id=unit_id) for row in contaminated],
            )
        else:
            payload = Chunk(chunk, [], [], {})
        records_key = [(r.id, r.code, r.input, r.entry) for r in payload.records]
        drops = drop_keys(payload.read_failures, payload.duplicates, payload.contaminated)
        units.append(Unit(index, unit_id, payload, fingerprint(records_key, *drops)))
    return units


@dataclass(frozen=True)
class FunctionsConfig(PythonConfig):
    """What a function-tracing job computes: the sandbox and the interpreter in it, the chunking, the tracer's
    budgets and backend, the trajectory sampling, the dedup parameters and the benchmark files records are cleaned
    against (`decontaminate`)."""

    kind: ClassVar[str] = "functions"
    tables: ClassVar[tuple[str, ...]] = ("traces", "trajectories", "duplicates", "contaminated", "failures")
    chunk_size: int = setting(16, Option("--chunk-size", "function records per unit, one Ray task each"))
    trace: TraceSettings = field(default_factory=TraceSettings)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    dedup: DedupSettings = field(default_factory=DedupSettings)
    decontaminate: Decontaminator = setting(default_factory=Decontaminator, hashed="when_set")

    def __post_init__(self):
        super().__post_init__()
        if type(self.chunk_size) is not int or self.chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {self.chunk_size!r}")

    @property
    def seed(self) -> int:
        return self.sampling.seed


class FunctionsKind(JobKind[FunctionsConfig]):
    command = "trace-functions"
    help = "trace JSONL function records"
    config_type = FunctionsConfig
    source = Option("--input", "JSONL file of {id, code, input, entry?}")
    throughput = Throughput("trace", "events", "events")
    task_memory_mb = 1024
    smaller_units = "a smaller --chunk-size"

    def preflight(self, config: FunctionsConfig) -> None:
        check_sandbox(config.sandbox, config.python)
        check_tracer_backend(config.sandbox, config.python, config.trace.tracer_backend)

    def units(self, source: str, config: FunctionsConfig) -> list[Unit]:
        records, read_failures, read = read_counted(source)
        records, duplicates, dedup = find_duplicates(records, config.dedup)
        counters, contaminated = {"read": read, "dedup": dedup}, []
        if config.decontaminate.enabled:  # no `decontaminate` counters without benchmarks: the stats stay as they were
            records, contaminated, counters["decontaminate"] = decontaminate(records, config.decontaminate)
        return chunk_units(records, read_failures, duplicates, counters, config.chunk_size, contaminated)

    def produce(self, payload: Chunk, unit_id: str, config: FunctionsConfig, sink: UnitSink) -> StageOutput:
        """Trace one chunk in the sandbox, drop the traces whose call has a benchmark item's input and returns its
        output (`--decontaminate`, the io rule: stage `decontaminate_traces`), then sample trajectories from the
        rest."""
        sandbox = make_sandbox(config.sandbox, python=config.python)
        traced = trace_functions(payload.records, sandbox, config.trace, unit_id)
        cleaner = TraceCleaner(config.decontaminate, unit_id, "decontaminate_traces", by_code=False)
        traces = traced.rows("traces")
        traced.tables["traces"] = cleaner.drop(traces, cleaner.matches(traces), "traces", "trace_id")
        sampled = sample_trajectories_stage(traced.rows("traces"), config.sampling, unit_id)
        dropped = StageOutput(
            {"failures": payload.read_failures, "duplicates": payload.duplicates, "contaminated": payload.contaminated},
            dict(payload.counters),
        )
        return dropped + traced + cleaner.output() + sampled
