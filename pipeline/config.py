"""Job configuration: everything that decides what a job computes, validated up front, hashed.

The config hash goes into every unit's completion record and the manifest: a re-run with the same
hash resumes (finished units are skipped); an output holding another config's dataset is refused
unless the user asks to overwrite it. Where the job runs (workers, Ray address) is not hashed.
"""

import hashlib
import json
from dataclasses import asdict, dataclass, field

from pipeline.debugger.policy import PolicyConfig
from pipeline.dedup import DedupSettings
from pipeline.sandbox import BACKENDS
from pipeline.stages.trace_functions import TraceSettings


@dataclass(frozen=True)
class JobConfig:
    sandbox: str = "bwrap"
    chunk_size: int = 16
    zstd_level: int = 3
    seed: int = 0
    per_trace: int = 2
    trace: TraceSettings = field(default_factory=TraceSettings)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    dedup: DedupSettings = field(default_factory=DedupSettings)

    def __post_init__(self):
        if self.sandbox not in BACKENDS:
            raise ValueError(f"unknown sandbox {self.sandbox!r}: choose one of {', '.join(BACKENDS)}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        if not 1 <= self.zstd_level <= 22:
            raise ValueError(f"zstd_level must be in 1..22, got {self.zstd_level}")
        if self.per_trace < 1:
            raise ValueError(f"per_trace (trajectories per trace and direction) must be >= 1, "
                             f"got {self.per_trace}")

    def as_dict(self) -> dict:
        values = asdict(self)
        values["trace"] = self.trace.as_dict()
        return values

    def hash(self) -> str:
        payload = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
