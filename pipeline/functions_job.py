"""The function-tracing job: JSONL records → chunks → (trace, sample trajectories) per Ray task."""

import functools
from dataclasses import dataclass

from pipeline.config import JobConfig
from pipeline.executor import Unit
from pipeline.job import run_job
from pipeline.sandbox import make_sandbox
from pipeline.sources.functions import FunctionRecord, read_function_records
from pipeline.stages.trace_functions import trace_functions
from pipeline.stages.trajectories import sample_trajectories_stage
from pipeline.stats import StageCounters


@dataclass(frozen=True)
class Chunk:
    """A unit's payload: consecutive records, and (for unit 0) the lines that could not be read."""

    records: list[FunctionRecord]
    read_failures: list[dict]
    read_counters: dict | None


def chunk_units(records: list[FunctionRecord], read_failures: list[dict], chunk_size: int) -> list[Unit]:
    """Consecutive records in file order, `chunk_size` a unit; unreadable lines go with unit 0."""
    chunks = [records[start:start + chunk_size] for start in range(0, len(records), chunk_size)] or [[]]
    read = StageCounters("read")
    read.n_in = len(records) + len(read_failures)
    read.n_out = len(records)
    for row in read_failures:
        read.drop(row["error_type"])
    units = []
    for index, chunk in enumerate(chunks):
        unit_id = f"functions-{index:05d}"
        if index == 0:
            payload = Chunk(chunk, [dict(row, unit_id=unit_id) for row in read_failures], read.as_dict())
        else:
            payload = Chunk(chunk, [], None)
        units.append(Unit(index, unit_id, payload))
    return units


def produce_chunk(chunk: Chunk, unit_id: str, config: JobConfig):
    """Trace one chunk in the sandbox; returns its rows per table and its stage counters."""
    sandbox = make_sandbox(config.sandbox)
    traces, failures, counters = trace_functions(chunk.records, sandbox, config.trace, unit_id)
    trajectories, sampling_failures, sampling = sample_trajectories_stage(
        traces, config.policy, config.seed, config.per_trace, unit_id)
    stats = {"trace": counters.as_dict(), "trajectories": sampling.as_dict()}
    if chunk.read_counters is not None:
        stats["read"] = chunk.read_counters
    return ({"traces": traces, "trajectories": trajectories,
             "failures": chunk.read_failures + failures + sampling_failures}, stats)


def trace_functions_job(input_uri: str, out: str, config: JobConfig, *, workers: int | None = None,
                        address: str | None = None, overwrite: bool = False) -> dict:
    records, read_failures = read_function_records(input_uri)
    units = chunk_units(records, read_failures, config.chunk_size)
    produce = functools.partial(produce_chunk, config=config)
    return run_job(units, produce, out, config, workers=workers, address=address, overwrite=overwrite)
