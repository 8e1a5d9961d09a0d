"""The function-tracing job: JSONL records → dedup → chunks → (trace, sample trajectories) per Ray task."""

import functools
from dataclasses import dataclass

from pipeline.config import JobConfig
from pipeline.dedup import DedupSettings, resolve_duplicates, signatures
from pipeline.executor import Unit, fingerprint
from pipeline.job import run_job
from pipeline.orchestrate import map_tasks
from pipeline.sandbox import make_sandbox
from pipeline.sources.functions import FunctionRecord, read_function_records
from pipeline.stages.trace_functions import trace_functions
from pipeline.stages.trajectories import sample_trajectories_stage
from pipeline.stats import StageCounters


DEDUP_BATCH = 512


@dataclass(frozen=True)
class Chunk:
    """A unit's payload: consecutive records; unit 0 also carries what the driver dropped before tracing
    (unreadable lines, near-duplicates) and the counters of those driver-side stages."""

    records: list[FunctionRecord]
    read_failures: list[dict]
    duplicates: list[dict]
    counters: dict


def find_duplicates(records: list[FunctionRecord], settings: DedupSettings, *, address=None, workers=None
                    ) -> tuple[list[FunctionRecord], list[dict], StageCounters]:
    """Kept records and `duplicates` rows: signatures in Ray tasks, resolution here in record order."""
    counters = StageCounters("dedup")
    counters.n_in = len(records)
    if not settings.enabled or not records:
        counters.n_out = len(records)
        return records, [], counters
    with counters.timed():
        batches = [[(r.code, r.entry, r.input) for r in records[start:start + DEDUP_BATCH]]
                   for start in range(0, len(records), DEDUP_BATCH)]
        sigs = [sig for batch in map_tasks(functools.partial(signatures, settings=settings), batches,
                                           address=address, workers=workers) for sig in batch]
        duplicates = resolve_duplicates(sigs, settings)
    rows = [{"unit_id": "", "source_id": records[position].id, "duplicate_of": records[kept].id,
             "similarity": float(similarity), "input_ref": records[position].input_ref}
            for position, (kept, similarity) in sorted(duplicates.items())]
    kept = [record for position, record in enumerate(records) if position not in duplicates]
    counters.n_out = len(kept)
    if rows:
        counters.drop("near_duplicate", len(rows))
    return kept, rows, counters


def chunk_units(records: list[FunctionRecord], read_failures: list[dict], duplicates: list[dict],
                counters: dict, chunk_size: int) -> list[Unit]:
    """Consecutive records in file order, `chunk_size` a unit; unit 0 carries the driver's drops."""
    chunks = [records[start:start + chunk_size] for start in range(0, len(records), chunk_size)] or [[]]
    units = []
    for index, chunk in enumerate(chunks):
        unit_id = f"functions-{index:05d}"
        if index == 0:
            payload = Chunk(chunk, [dict(row, unit_id=unit_id) for row in read_failures],
                            [dict(row, unit_id=unit_id) for row in duplicates], counters)
        else:
            payload = Chunk(chunk, [], [], {})
        units.append(Unit(index, unit_id, payload, fingerprint(
            [(r.id, r.code, r.input, r.entry) for r in payload.records],
            [(row["input_ref"], row["message"]) for row in payload.read_failures],
            [(row["source_id"], row["duplicate_of"]) for row in payload.duplicates])))
    return units


def produce_chunk(chunk: Chunk, unit_id: str, config: JobConfig):
    """Trace one chunk in the sandbox; returns its rows per table and its stage counters."""
    sandbox = make_sandbox(config.sandbox)
    traces, failures, counters = trace_functions(chunk.records, sandbox, config.trace, unit_id)
    trajectories, sampling_failures, sampling = sample_trajectories_stage(
        traces, config.policy, config.seed, config.per_trace, unit_id)
    stats = {**chunk.counters, "trace": counters.as_dict(), "trajectories": sampling.as_dict()}
    return ({"traces": traces, "trajectories": trajectories, "duplicates": chunk.duplicates,
             "failures": chunk.read_failures + failures + sampling_failures}, stats)


def trace_functions_job(input_uri: str, out: str, config: JobConfig, *, workers: int | None = None,
                        address: str | None = None, overwrite: bool = False) -> dict:
    records, read_failures = read_function_records(input_uri)
    read = StageCounters("read")
    read.n_in, read.n_out = len(records) + len(read_failures), len(records)
    for row in read_failures:
        read.drop(row["error_type"])
    records, duplicates, dedup = find_duplicates(records, config.dedup, address=address, workers=workers)
    units = chunk_units(records, read_failures, duplicates, {"read": read.as_dict(), "dedup": dedup.as_dict()},
                        config.chunk_size)
    produce = functools.partial(produce_chunk, config=config)
    return run_job(units, produce, out, config, workers=workers, address=address, overwrite=overwrite)
