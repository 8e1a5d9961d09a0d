"""The re-sampling kind: trajectories drawn again from a stored dataset's traces, without re-tracing (new
augmentation epochs, another policy).

One unit per `traces` shard of the source dataset's manifest (a shard past SPLIT_BYTES, a compacted one: one
unit per row group of it); each writes `trajectories` (and `failures` for traces that cannot be walked) into
the output dataset. A unit's fingerprint is its shard's sha256 (and row group), so re-sampling an edited
source dataset re-runs exactly the shards that changed.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.engine.config import KindConfig, Option
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.reader import open_dataset, shard_batches
from pipeline.engine.stats import StageOutput
from pipeline.stages.trajectories import SamplingSettings, TrajectorySampler


@dataclass(frozen=True)
class ResampleConfig(KindConfig):
    """How trajectories are sampled (the traces are the input, identified by their shards' hashes)."""

    kind: ClassVar[str] = "resample"
    tables: ClassVar[tuple[str, ...]] = ("trajectories", "failures")
    sampling: SamplingSettings = field(default_factory=SamplingSettings)

    @property
    def seed(self) -> int:
        return self.sampling.seed


SPLIT_BYTES = 64 << 20
BATCH_ROWS = 256  # traces read, and their trajectories written, at a time


@dataclass(frozen=True)
class TracesShard:
    """A unit's payload: one traces shard of the source dataset (one row group of it, when `row_group` >= 0)."""

    source: str
    path: str
    row_group: int = -1


class ResampleKind(JobKind[ResampleConfig]):
    command = "trajectories"
    help = "re-sample trajectories from stored traces"
    config_type = ResampleConfig
    source = Option("--traces", "a dataset (the --out of a tracing job)")
    throughput = Throughput("trajectories", "out", "trajectories")
    task_memory_mb = 2048
    smaller_units = "a unit is a shard of --traces: trace with smaller units"

    def units(self, source: str, config: ResampleConfig) -> list[Unit]:
        dataset = open_dataset(source, "point it at the --out of a tracing job", "--traces")
        pieces: list[tuple[TracesShard, str]] = []
        for shard in dataset.shards("traces"):
            if shard["bytes"] <= SPLIT_BYTES:
                pieces.append((TracesShard(dataset.uri, shard["path"]), fingerprint(shard["sha256"])))
                continue
            groups = dataset.footer(shard["path"]).num_row_groups
            pieces += [
                (TracesShard(dataset.uri, shard["path"], group), fingerprint(shard["sha256"], group))
                for group in range(groups)
            ]
        return [Unit(index, f"resample-{index:05d}", payload, digest) for index, (payload, digest) in enumerate(pieces)]

    def produce(self, payload: TracesShard, unit_id: str, config: ResampleConfig, sink: UnitSink) -> StageOutput:
        """Traces are read and their trajectories written BATCH_ROWS at a time."""
        sampler = TrajectorySampler(config.sampling, unit_id)
        group = payload.row_group
        row_groups = {} if group < 0 else {payload.path: (group, group + 1)}
        for batch in shard_batches(payload.source, [payload.path], row_groups=row_groups, batch_rows=BATCH_ROWS):
            sink.write("trajectories", sampler.sample(batch.to_pylist()))
        return sampler.output()
