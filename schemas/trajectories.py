"""The `trajectories` table: one row per sampled debugger trajectory (grammar: schemas/trajectories.md)."""

import pyarrow as pa

from schemas.fields import field

VERSION = 2

ACTION = pa.struct(
    [
        field(
            "action",
            pa.string(),
            "step_into | step_over | step_return | breakpoint | continue (forward); "
            "inv_step_into | inv_step_over | inv_step_call (inverse)",
            nullable=False,
        ),
        field(
            "target",
            pa.string(),
            "the breakpoint's source line text, exact (leading whitespace included); null for every other action",
        ),
    ]
)

SCHEMA = pa.schema(
    [
        field(
            "trajectory_id",
            pa.string(),
            "hash of (trace_id, direction, seed, policy_version, sample_index) (hex)",
            nullable=False,
        ),
        field("trace_id", pa.string(), "the `traces` row this trajectory walks", nullable=False),
        field("source_id", pa.string(), "the trace's source_id", nullable=False),
        field(
            "direction",
            pa.string(),
            "forward (forward tree, forward actions) | inverse (inverse tree, inverse actions)",
            nullable=False,
        ),
        field(
            "seed",
            pa.int64(),
            "the sampling seed; with trace_id, direction, policy_version and sample_index it determines the row",
            nullable=False,
        ),
        field(
            "policy_version",
            pa.string(),
            "PolicyConfig.version + '-' + a hash of every policy value (mixtures, breakpoint miss rate, step cap, ...)",
            nullable=False,
        ),
        field(
            "sample_index",
            pa.int32(),
            "index of this trajectory among the trace's trajectories of this direction (0 .. per_trace-1)",
            nullable=False,
        ),
        field(
            "actions",
            pa.list_(pa.field("item", ACTION, nullable=False)),
            "the actions taken, in order; one fewer than states",
            nullable=False,
        ),
        field(
            "states",
            pa.list_(pa.field("item", pa.int32(), nullable=False)),
            "visited node indices: forward, "
            "the event index (n_events = the exit pseudo-state); inverse, the position in the inverse tree's "
            "pre-order (pipeline/debugger/trees.py; the last is the entry pseudo-state). The first is the "
            "start node",
            nullable=False,
        ),
        field(
            "exit",
            pa.string(),
            "how the trajectory ended: forward normal | error | never (the exit "
            "pseudo-state reached, the trace's exit); inverse entry (the entry pseudo-state reached); "
            "cut (the step cap was reached first)",
            nullable=False,
        ),
        field(
            "n_tokens",
            pa.int32(),
            "length of `text` in tokens; byte-level (UTF-8 bytes) until a tokenizer exists",
            nullable=False,
        ),
        field(
            "text",
            pa.string(),
            "the trajectory in the formal language's debugger dialect (schemas/trajectories.md: CWM's "
            "frames, debugger actions as extension tokens between them), with the trace's code as context",
            nullable=False,
        ),
    ]
)
