"""Stage: sample debugger trajectories from `traces` rows (no tracing, no I/O, no Ray).

A trace whose shape the state trees cannot walk (empty, malformed) becomes a failures row; so does any
unexpected error on one trace, which never costs another trace its trajectories.
"""

import operator
from dataclasses import dataclass

from pipeline.debugger.events import Trace, TraceShapeError
from pipeline.debugger.policy import DIRECTIONS, PolicyConfig, Trajectory, sample_trajectories
from pipeline.engine.config import Option, setting
from pipeline.engine.failures import Failure, Failures, Input
from pipeline.engine.stats import StageCounters, StageOutput

STAGE = "trajectories"
BOTH = "both"
# The options of the policy's settings a job offers (the debugger, pure, declares none).
POLICY_OPTIONS = {
    "directions": Option(
        "--directions",
        "the trees trajectories walk: both, forward only, or inverse only",
        choices=(BOTH, *DIRECTIONS),
        parse=lambda given: DIRECTIONS if given == BOTH else (given,),
        show=lambda directions: BOTH if tuple(directions) == DIRECTIONS else directions[0],
    ),
    "locals_delta": Option(
        "--full-locals",
        "write every frame's locals in full, as CWM does",
        action="store_true",
        parse=operator.not_,
        show=operator.not_,
        default_text="off: the tracegen locals delta",
    ),
}


def trajectory_row(trajectory: Trajectory) -> dict:
    """A `trajectories` row (schemas/trajectories.py)."""
    return {
        "trajectory_id": trajectory.trajectory_id,
        "trace_id": trajectory.trace_id,
        "source_id": trajectory.source_id,
        "direction": trajectory.direction,
        "seed": trajectory.seed,
        "policy_version": trajectory.policy_version,
        "sample_index": trajectory.sample_index,
        "actions": [{"action": action.name, "target": action.target} for action in trajectory.actions],
        "states": list(trajectory.nodes),
        "exit": trajectory.exit,
        "n_tokens": len(trajectory.text.encode("utf-8", "surrogatepass")),
        "text": trajectory.text,
    }


@dataclass(frozen=True)
class SamplingSettings:
    """How trajectories are drawn from each trace: the seed of every choice, how many per trace and
    direction, and the policy."""

    seed: int = setting(0, Option("--seed", "seed of every random choice"))
    per_trace: int = setting(2, Option("--per-trace", "trajectories per trace and direction"))
    policy: PolicyConfig = setting(default_factory=PolicyConfig, options=POLICY_OPTIONS)

    def __post_init__(self):
        if type(self.seed) is not int:
            raise ValueError(f"seed must be an int, got {self.seed!r}")
        if type(self.per_trace) is not int or self.per_trace < 1:
            raise ValueError(
                f"per_trace (trajectories per trace and direction) must be a positive int, got {self.per_trace!r}"
            )


class TrajectorySampler:
    """Samples trajectories from `traces` rows batch by batch, as a unit makes them (positions run on across
    batches): `sample(rows)` returns the batch's `trajectories` rows; `failures` and `counters` gather over all
    batches (`n_in` counts traces, `n_out` trajectories, `dropped` failed traces by error type)."""

    def __init__(self, sampling: SamplingSettings, unit_id: str):
        self.sampling = sampling
        self.counters = StageCounters(STAGE)
        self.failures = Failures(unit_id)

    def sample(self, trace_rows: list[dict]) -> list[dict]:
        """The rows' trajectories: trace order, then forward before inverse, then sample index."""
        sampling, counters = self.sampling, self.counters
        rows: list[dict] = []
        with counters.timed():
            for row in trace_rows:
                position = counters.n_in
                counters.n_in += 1
                trace_id = row.get("trace_id") if isinstance(row, dict) else None
                source_id = row.get("source_id") if isinstance(row, dict) else None
                try:
                    trace = Trace.from_row(row)
                    produced = [
                        trajectory_row(t)
                        for t in sample_trajectories(trace, sampling.policy, sampling.seed, sampling.per_trace)
                    ]
                except TraceShapeError as error:
                    self._fail(source_id, trace_id, position, error.error_type, str(error))
                    continue
                except Exception as error:  # a bug or an unforeseen shape: one trace, not the unit
                    message = f"unexpected error while sampling: {error}"
                    self._fail(source_id, trace_id, position, type(error).__name__, message)
                    continue
                rows.extend(produced)
                counters.n_out += len(produced)
        return rows

    def _fail(self, source_id, trace_id, position, error_type, message) -> None:
        ref = f"trace:{trace_id}" if trace_id else f"trace-row:{position}"
        trace = Input(source_id, ref, f"trace {trace_id or position!r}")
        self.failures.add(trace, Failure(STAGE, error_type, message), self.counters)

    def output(self, trajectories: list[dict] | None = None) -> StageOutput:
        """The stage's output: `trajectories` (those not yet written), the failures and the counters."""
        return StageOutput({"trajectories": trajectories or [], "failures": self.failures.rows}, {STAGE: self.counters})


def sample_trajectories_stage(trace_rows: list[dict], sampling: SamplingSettings, unit_id: str) -> StageOutput:
    """`trajectories` and `failures` rows of a batch of traces, with the stage's counters (`TrajectorySampler`)."""
    sampler = TrajectorySampler(sampling, unit_id)
    return sampler.output(sampler.sample(trace_rows))
