"""A run directory's files: `RUN/config.json` (what the run trains), `RUN/checkpoints/step_{S:08d}/state.pt` (one per
checkpoint, the newest resumed) and `RUN/metrics.jsonl` (one JSON line per logged step, one per learning-curve
point)."""

import os

CHECKPOINTS = "checkpoints"
CONFIG_FILE = "config.json"
METRICS = "metrics.jsonl"
STATE_FILE = "state.pt"


def latest_checkpoint(out: str) -> str | None:
    """The newest checkpoint's state file in the run `out`; None when it has none."""
    root = os.path.join(out, CHECKPOINTS)
    names = sorted(name for name in os.listdir(root) if name.startswith("step_")) if os.path.isdir(root) else []
    return os.path.join(root, names[-1], STATE_FILE) if names else None
