"""Re-sample trajectories from a stored dataset's traces, without re-tracing (new augmentation epochs).

One unit per `traces` shard of the source dataset's manifest; each writes `trajectories` (and
`failures` for traces that cannot be walked) into the output dataset.
"""

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field

import pyarrow.parquet as pq

from pipeline.dataset import open_root, read_manifest
from pipeline.debugger.policy import PolicyConfig
from pipeline.executor import Unit, fingerprint
from pipeline.job import run_job
from pipeline.stages.trajectories import sample_trajectories_stage


@dataclass(frozen=True)
class ResampleConfig:
    """What a re-sampling job computes: which traces (by their dataset's config) and how to sample."""

    source: str
    source_config_hash: str
    seed: int = 0
    per_trace: int = 2
    zstd_level: int = 3
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def as_dict(self) -> dict:
        return asdict(self)

    def hash(self) -> str:
        payload = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def resample_units(source: str) -> tuple[list[Unit], str]:
    """One unit per traces shard of the source manifest; also returns the source's config hash."""
    fs, root = open_root(source)
    manifest = read_manifest(fs, root)
    if manifest is None:
        raise ValueError(f"--traces {source!r} holds no dataset (no manifest.json); point it at the --out "
                         f"of a tracing job")
    shards = manifest["tables"]["traces"]["shards"]
    units = [Unit(index, f"resample-{index:05d}", shard["path"], fingerprint(shard["sha256"]))
             for index, shard in enumerate(shards)]
    return units, manifest["config_hash"]


def produce_resample(shard_path: str, unit_id: str, config: ResampleConfig):
    fs, root = open_root(config.source)
    with fs.open_input_file(f"{root}/{shard_path}") as source:
        rows = pq.read_table(source).to_pylist()
    trajectories, failures, counters = sample_trajectories_stage(rows, config.policy, config.seed,
                                                                 config.per_trace, unit_id)
    return {"trajectories": trajectories, "failures": failures}, {"trajectories": counters.as_dict()}


def resample_job(traces: str, out: str, *, seed: int = 0, per_trace: int = 2, policy: PolicyConfig | None = None,
                 workers: int | None = None, address: str | None = None, overwrite: bool = False) -> dict:
    units, source_hash = resample_units(traces)
    config = ResampleConfig(traces, source_hash, seed, per_trace, policy=policy or PolicyConfig())
    produce = functools.partial(produce_resample, config=config)
    return run_job(units, produce, out, config, workers=workers, address=address, overwrite=overwrite)
