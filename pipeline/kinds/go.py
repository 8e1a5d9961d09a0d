"""The Go tracing kind: a directory of Go programs → one Ray task per program → go_programs, go_runs,
go_traces, go_next_event, go_trajectories and failures.

Units are the entries of `discover_programs`, in sorted program-id order (so unit indices, shard
names and the output are deterministic); a directory that is not a program (or whose timeout header is
malformed) is its own unit and yields only a failure row. A unit's fingerprint covers the program's files
and its own timeout, so editing `tracegen.toml` re-runs just the programs whose entry changed. Before
any task starts, the driver builds the harness (a clear error if Go is missing); each worker builds it
too when its machine lacks it (pipeline/stages/go/build.py).
"""

import functools
from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.engine.config import Option
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.failures import failure_row
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.kinds.options import SandboxedConfig
from pipeline.sandbox import check_sandbox, make_sandbox
from pipeline.sources.go_programs import GoProgram, NotAProgram, directory_digest, discover_programs
from pipeline.stages.go import GO_TABLES
from pipeline.stages.go import build as go_build
from pipeline.stages.go.next_event import next_event_rows
from pipeline.stages.go.runs import GoSettings, GoTools, program_settings, trace_program
from pipeline.stages.go.trajectories import go_trajectory_rows


@dataclass(frozen=True)
class GoConfig(SandboxedConfig):
    """What a Go tracing job computes: the sandbox and the Go settings (runs, timeouts, limits, race)."""

    kind: ClassVar[str] = "go"
    tables: ClassVar[tuple[str, ...]] = GO_TABLES
    go: GoSettings = field(default_factory=GoSettings)


@functools.lru_cache(maxsize=4)
def go_tools(settings: GoSettings) -> GoTools:
    """The toolchain and harness, resolved (and the harness built) once per process and settings."""
    return GoTools.resolve(settings)


def program_units(programs_dir: str) -> list[Unit]:
    """One unit per discovered entry, in program-id order; unit ids are `go:<program id>`."""
    return [
        Unit(index, f"go:{entry.program_id}", entry, fingerprint(*_content(entry)))
        for index, entry in enumerate(discover_programs(programs_dir))
    ]


def _content(entry: GoProgram | NotAProgram) -> tuple:
    """What a unit computes from: the program id, its files, and its own timeout when it has one."""
    own = getattr(entry, "timeout_s", None)
    return (entry.program_id, directory_digest(entry.path)) + (() if own is None else (own,))


def not_a_program(entry: NotAProgram, unit_id: str) -> StageOutput:
    """The one failure row of a directory that is not a Go program."""
    read = StageCounters("read")
    read.n_in = 1
    read.drop(entry.error_type)
    failure = failure_row(
        unit_id, entry.program_id, "read", entry.error_type, f"{entry.path!r} {entry.reason}", entry.path
    )
    return StageOutput({"failures": [failure]}, {"read": read})


class GoKind(JobKind[GoConfig]):
    command = "trace-go"
    help = "run Go programs N times under runtime/trace"
    config_type = GoConfig
    source = Option("--programs", "directory whose subdirectories are Go programs")
    throughput = Throughput("go_runs", "events", "events")
    task_memory_mb = 2048
    smaller_units = "a unit is one program: fewer --runs or a lower --max-events"

    def preflight(self, config: GoConfig) -> None:
        """The sandbox, then Go: the toolchain found and the harness built, once, before any task starts."""
        check_sandbox(config.sandbox)
        go_tools(config.go)

    def units(self, source: str, config: GoConfig) -> list[Unit]:
        units = program_units(source)
        if not units:
            raise ValueError(
                f"--programs {source!r} holds no subdirectory; put each Go program in its own subdirectory"
            )
        # On one machine this builds each shared warm cache once instead of in every waiting worker.
        tools = go_tools(config.go)
        for mode in sorted({unit.payload.mode for unit in units if isinstance(unit.payload, GoProgram)}):
            go_build.ensure_warm_cache(
                mode, config.go.race, config.go.warm_imports, config.go.cache_dir, tools.toolchain
            )
        return units

    def produce(self, payload: GoProgram | NotAProgram, unit_id: str, config: GoConfig, sink: UnitSink) -> StageOutput:
        """Trace the program N times and compute its next-event distributions and trajectory windows."""
        if isinstance(payload, NotAProgram):
            return not_a_program(payload, unit_id)
        settings = config.go
        sandbox = make_sandbox(config.sandbox, program_settings(payload, settings).limits())
        traced = trace_program(payload, settings, sandbox, unit_id, go_tools(settings))
        runs = traced.rows("go_runs")
        window, stride = settings.trajectory_window, settings.trajectory_stride
        return (
            traced
            + next_event_rows(payload.program_id, runs, settings.min_prefix_runs)
            + go_trajectory_rows(payload.program_id, runs, window, stride)
        )
