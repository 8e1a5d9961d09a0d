"""The Go re-derivation kind: a Go dataset's `go_runs` events re-derived from its stored raw traces by the
current harness (a newer event mapping, another event cap), and their distributions recomputed, without
re-running any program.

One unit per unit of the source dataset (one Go program each): its `go_runs`, `go_traces` and `go_programs`
shards, found through the source manifest by their unit number (in a compacted dataset, one unit per
compacted group: it holds whole programs, all their tables; pipeline/engine/compaction/). The output holds
`go_runs`, `go_next_event`, `go_trajectories`, and the raw `go_traces` and the `go_programs` rows again (so it
can itself be re-derived or exported); a program whose stored traces do not re-parse is a failures row of its
own, and so is each run whose re-derived events break a scheduler rule (pipeline/goscheduler/validity.py; the
run's row is still written). A dataset with another go_runs version is refused (re-run trace-go): one before 3
holds no program sources, one before 4 no leaked states.
"""

from dataclasses import dataclass
from typing import ClassVar

from pipeline.engine.config import KindConfig, Option, setting
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.failures import Failure, failure_row
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.reader import find_dataset, shard_rows, shard_writer
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.stages.go import GO_TABLES
from pipeline.stages.go import build as go_build
from pipeline.stages.go import trajectories as go_trajectories
from pipeline.stages.go.next_event import next_event_rows
from pipeline.stages.go.rederive import rederive_runs
from pipeline.stages.go.runs import sequence_failure
from pipeline.stages.go.trajectories import go_trajectory_rows
from schemas import go_runs


@dataclass(frozen=True)
class RederiveConfig(KindConfig):
    """max_events: the event cap to re-parse with (0 = each trace's stored cap); min_prefix_runs: as in the
    Go job, for the exact-prefix distribution rows; trajectory_window / trajectory_stride: as in the Go job, for
    the go_trajectories windows."""

    kind: ClassVar[str] = "rederive-go"
    tables: ClassVar[tuple[str, ...]] = GO_TABLES
    max_events: int = setting(0, Option("--max-events", "event cap per run (0: the stored cap)"))
    min_prefix_runs: int = 2
    trajectory_window: int = setting(go_trajectories.WINDOW, go_trajectories.WINDOW_OPTION)
    trajectory_stride: int = setting(go_trajectories.STRIDE, go_trajectories.STRIDE_OPTION)

    def __post_init__(self):
        super().__post_init__()
        if type(self.max_events) is not int or self.max_events < 0:
            raise ValueError(f"--max-events must be >= 0 (0 keeps each trace's cap), got {self.max_events!r}")
        if type(self.min_prefix_runs) is not int or self.min_prefix_runs < 1:
            raise ValueError(f"min_prefix_runs must be a positive int, got {self.min_prefix_runs!r}")
        for name in ("trajectory_window", "trajectory_stride"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"--go-{name[11:]} must be a positive int, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class ProgramShards:
    """A unit's payload: the source dataset and the shards of one of its units."""

    source: str
    runs: tuple[str, ...]
    traces: tuple[str, ...]
    programs: tuple[str, ...] = ()


class RederiveKind(JobKind[RederiveConfig]):
    command = "rederive-go"
    help = "re-derive Go events and distributions from a Go dataset's stored raw traces"
    config_type = RederiveConfig
    source = Option("--data", "a Go dataset (the --out of trace-go)")
    throughput = Throughput("go_runs", "events", "events")
    task_memory_mb = 2048
    smaller_units = "a unit is one program: a lower --max-events"

    def preflight(self, config: RederiveConfig) -> None:
        go_build.ensure_harness()

    def units(self, source: str, config: RederiveConfig) -> list[Unit]:
        dataset = find_dataset(source)
        if dataset is None or dataset.manifest.get("kind") != "go":
            raise ValueError(
                f"--data {source!r} holds no Go dataset (a manifest.json of kind go); point it at the --out of trace-go"
            )
        version = dataset.manifest["tables"].get("go_runs", {}).get("schema_version")
        if version != go_runs.VERSION:
            raise ValueError(
                f"--data {source!r} holds go_runs version {version}, this tracegen writes version {go_runs.VERSION} "
                f"(an older dataset lacks columns this version writes); re-run trace-go to make a current dataset"
            )
        tables = ("go_runs", "go_traces", "go_programs")
        by_unit: dict[str, dict[str, list[dict]]] = {}
        for table in tables:
            for shard in dataset.shards(table):
                found = shard_writer(shard["path"])
                if found is None:
                    raise ValueError(
                        f"--data {source!r}: shard {shard['path']!r} is not named part-UNIT-SEQ.parquet "
                        f"or compact-G.parquet"
                    )
                unit = found[2]
                by_unit.setdefault(unit, {name: [] for name in tables})[table].append(shard)
        units = []
        for index, (unit, shards) in enumerate(sorted(by_unit.items())):
            payload = ProgramShards(dataset.uri, *(tuple(s["path"] for s in shards[name]) for name in tables))
            digest = fingerprint([s["sha256"] for name in tables for s in shards[name]])
            units.append(Unit(index, f"rederive-{unit}", payload, digest))
        return units

    def produce(self, payload: ProgramShards, unit_id: str, config: RederiveConfig, sink: UnitSink) -> StageOutput:
        runs, traces = list(shard_rows(payload.source, payload.runs)), list(shard_rows(payload.source, payload.traces))
        counters = StageCounters("go_runs")
        counters.n_in = len(runs)
        programs = list(shard_rows(payload.source, payload.programs))
        output = StageOutput(
            {"go_runs": [], "go_traces": traces, "go_programs": programs, "failures": []}, {"go_runs": counters}
        )
        for program in sorted({row["program_id"] for row in runs}):
            mine = [row for row in runs if row["program_id"] == program]
            stored = [row for row in traces if row["program_id"] == program]
            with counters.timed():
                try:
                    rows = rederive_runs(mine, stored, max_events=config.max_events or None)
                except (ValueError, OSError) as error:
                    counters.drop("RederiveFailed")
                    failure = Failure("parse", "RederiveFailed", f"its stored traces do not re-derive ({error})")
                    output.tables["failures"].append(_failure_row(unit_id, payload.source, program, failure))
                    continue
            invalid = (failure for failure in map(sequence_failure, rows) if failure is not None)
            output.tables["failures"] += [_failure_row(unit_id, payload.source, program, f) for f in invalid]
            counters.n_out += len(rows)
            counters.events += sum(row["n_events"] for row in rows)
            window, stride = config.trajectory_window, config.trajectory_stride
            output = (
                output
                + StageOutput({"go_runs": rows})
                + next_event_rows(program, rows, config.min_prefix_runs)
                + go_trajectory_rows(program, rows, window, stride)
            )
        return output


def _failure_row(unit_id: str, source: str, program: str, failure: Failure) -> dict:
    """The failures row of one program of the source dataset."""
    return failure_row(
        unit_id,
        program,
        failure.stage,
        failure.error_type,
        f"Go program {program!r}: {failure.message}",
        f"{source}:{program}",
    )
