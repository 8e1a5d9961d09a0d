"""The Go tracing job: a directory of Go programs → one Ray task per program → go_runs, go_traces,
go_next_event and failures.

Units are the entries of `discover_programs`, in sorted program-id order (so unit indices, shard
names and the output are deterministic); a directory that is not a program is its own unit and yields
only a failure row. Before any task starts, the driver builds the harness (a clear error if Go is
missing); each worker builds it too when its machine lacks it (pipeline/go_build.py).
"""

import functools
from dataclasses import dataclass, field, fields, replace

from pipeline import go_build
from pipeline.config import JobConfig
from pipeline.executor import Unit, fingerprint
from pipeline.failures import failure_row
from pipeline.job import run_job
from pipeline.sandbox import make_sandbox
from pipeline.sources.go import GoProgram, NotAProgram, directory_digest, discover_programs
from pipeline.stages.go_next_event import next_event_rows
from pipeline.stages.go_runs import GoSettings, GoTools, trace_program
from pipeline.stats import StageCounters


@dataclass(frozen=True)
class GoJobConfig(JobConfig):
    """JobConfig plus the Go settings, all of it hashed into completion records and the manifest."""

    go: GoSettings = field(default_factory=GoSettings)

    @classmethod
    def of(cls, config: JobConfig, go: GoSettings) -> "GoJobConfig":
        values = {f.name: getattr(config, f.name) for f in fields(config) if f.name != "go"}
        return cls(**values, go=go)

    def as_dict(self) -> dict:
        values = super().as_dict()
        values["go"] = self.go.as_dict()
        return values


@functools.lru_cache(maxsize=4)
def _tools(settings: GoSettings) -> GoTools:
    return GoTools.resolve(settings)


def produce_program(entry: GoProgram | NotAProgram, unit_id: str, config: GoJobConfig):
    """One unit: trace the program and compute its distributions; rows per table and stage counters."""
    if isinstance(entry, NotAProgram):
        read = StageCounters("read")
        read.n_in = 1
        read.drop("NotAGoProgram")
        failure = failure_row(unit_id, entry.program_id, "read", "NotAGoProgram",
                              f"{entry.path!r} {entry.reason}", entry.path)
        return {"failures": [failure]}, {"read": read.as_dict()}
    settings = config.go
    sandbox = make_sandbox(config.sandbox, settings.limits())
    traced = trace_program(entry, settings, sandbox, unit_id, _tools(settings))
    distributions, counters = next_event_rows(entry.program_id, traced.runs, settings.min_prefix_runs)
    tables = {"go_runs": traced.runs, "go_traces": traced.traces, "go_next_event": distributions,
              "failures": traced.failures}
    return tables, {"go_runs": traced.counters.as_dict(), "go_next_event": counters.as_dict()}


def program_units(programs_dir: str) -> list[Unit]:
    """One unit per discovered entry, in program-id order; unit ids are `go:<program id>`."""
    return [Unit(index, f"go:{entry.program_id}", entry, fingerprint(entry.program_id, directory_digest(entry.path)))
            for index, entry in enumerate(discover_programs(programs_dir))]


def trace_go_job(programs_dir: str, out: str, config: JobConfig, *, runs: int | None = None,
                 settings: GoSettings | None = None, workers: int | None = None, address: str | None = None,
                 overwrite: bool = False) -> dict:
    """Trace every program under `programs_dir` into the dataset at `out`; returns the manifest.

    `settings` defaults to `config.go` when the config carries one, else GoSettings(); `runs`, when
    given, overrides settings.runs (the CLI's --runs)."""
    go = settings or getattr(config, "go", None) or GoSettings()
    if runs is not None:
        go = replace(go, runs=runs)
    job_config = GoJobConfig.of(config, go)
    units = program_units(programs_dir)
    if not units:
        raise ValueError(f"--programs {programs_dir!r} holds no subdirectory; put each Go program in its own "
                         f"subdirectory")
    # Fail early and clearly (no Go, the harness or the warm cache does not build) before any task starts;
    # on one machine this also builds each shared artefact once instead of in every waiting worker.
    tools = _tools(go)
    for mode in sorted({unit.payload.mode for unit in units if isinstance(unit.payload, GoProgram)}):
        go_build.ensure_warm_cache(mode, go.race, go.warm_imports, go.cache_dir, tools.toolchain)
    produce = functools.partial(produce_program, config=job_config)
    return run_job(units, produce, out, job_config, workers=workers, address=address, overwrite=overwrite)
