"""The `go_trajectories` table: windows of consecutive scheduler events of a Go program's runs, each step with
the empirical next-event distribution of its prefix, so a model can be trained on multi-step rollouts with a
soft target at every step.

Events are scheduler events only (go_runs `events` without UserLog / UserRegion), as in go_next_event. A
counted run's sequence (build_error rows never count) is its events, followed by `End` when the run is complete
(an incomplete run is censored: its sequence stops at its last known event). Windows are `trajectory_window` (k)
consecutive steps of that sequence, starting at depths 0, s, 2s, ... (s = `trajectory_stride`) below its length;
a window near the end holds fewer. Step i of a window starting at depth d is step d+i of the sequence and
carries the distribution of go_next_event's `exact` key at depth d+i: the runs whose first d+i events are
identical to the window's, counting what came next (an event type, or `End` for a complete run that ended
there; incomplete runs are censored after their last known event, never `End`), but at every step: a prefix
only one run reached gives n = 1 (go_next_event keeps only prefixes shared by `min_prefix_runs` runs). The
step's own outcome is among those counted, so n >= 1 and its count >= 1.

Identical windows are one row: a row is keyed by (program_id, depth, window_hash, n_steps) — the prefix before
the window and the window's events (and whether it ends with `End`) — and `runs` lists every run it came from.
"""

import pyarrow as pa

from schemas.fields import field
from schemas.go_next_event import COUNTS

VERSION = 1

STEP = pa.struct(
    [
        field(
            "event",
            pa.string(),
            "the step's outcome: the event type of event depth+i of the runs, or End (the runs are complete and "
            "ended here)",
            nullable=False,
        ),
        field("goroutine", pa.int32(), "program-canonical goroutine id (as in go_runs); null for End"),
        field("reason", pa.string(), "the event's reason, as in go_runs ('' when none, and for End)", nullable=False),
        field("function", pa.string(), "the event's frame function, as in go_runs ('' for End)", nullable=False),
        field("file", pa.string(), "the frame's file, as in go_runs ('' for End)", nullable=False),
        field("line", pa.int32(), "the frame's line, as in go_runs (0 for End)", nullable=False),
        field(
            "n",
            pa.int32(),
            "runs counted at this step: those sharing the window's run's first depth+i events whose event depth+i "
            "is known, or that are complete and ended there (incomplete runs are censored); >= 1",
            nullable=False,
        ),
        field(
            "counts",
            COUNTS,
            "what came next in the counted runs, per outcome (go_next_event.OUTCOMES); they sum to n",
            nullable=False,
        ),
        field("entropy", pa.float64(), "Shannon entropy of counts / n in bits", nullable=False),
    ]
)

SCHEMA = pa.schema(
    [
        field("program_id", pa.string(), "the go_runs program_id", nullable=False),
        field("depth", pa.int32(), "d: the window's first step is the runs' event d (0-based)", nullable=False),
        field(
            "prefix_hash",
            pa.string(),
            "h_d of the prefix before the window, as go_next_event.prefix_hash (the exact key's chain of sha256 "
            "over each event's [goroutine, event, reason, function, file, line]); joins the `exact` rows at depth d",
            nullable=False,
        ),
        field(
            "window_hash",
            pa.string(),
            "the same chain continued over the window's events (End not included): h_{d+m}, m the window's events",
            nullable=False,
        ),
        field("n_steps", pa.int32(), "number of steps, End included; at most the window size k", nullable=False),
        field(
            "ends",
            pa.bool_(),
            "the last step is End: the runs are complete and ended inside the window (a window may be End alone)",
            nullable=False,
        ),
        field(
            "runs",
            pa.list_(pa.field("item", pa.int32(), nullable=False)),
            "run_index of every run this window came from (the same prefix and events), ascending",
            nullable=False,
        ),
        field(
            "steps",
            pa.list_(pa.field("item", STEP, nullable=False)),
            "the window's steps in order; step i describes event depth+i and its prefix's distribution",
            nullable=False,
        ),
    ]
)
