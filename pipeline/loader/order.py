"""The global sample order of an epoch and each consumer's share of it: pure functions of their arguments.

Guarantees (tests/loader/test_order.py):
- `epoch_order` depends only on (the samples' groups, the weights, seed, epoch): never on the world size or
  the number of DataLoader workers, so every topology reads the same global stream.
- With every weight 1 it is a permutation of all samples: one epoch reads each sample exactly once.
- Weights mix groups by whole samples: group g contributes round(w·n_g) samples an epoch — each sample
  ⌊w⌋ times, plus a seeded choice (without replacement) of the fractional part; 0 leaves g out.
- Global batch b is positions [b·G, (b+1)·G) of the order; rank r of W takes its contiguous G/W of them;
  its micro-batches are numbered in order, and worker k of K takes every K-th of those from the start.
"""

import numpy as np

MIX_DEFAULTS = {"function": 1.0, "repo": 1.0, "unknown": 1.0, "forward": 1.0, "inverse": 1.0, "go": 1.0}


def group_weight(group: str, mix: dict[str, float]) -> float:
    """A group's weight: the product of its tags' weights (`repo/inverse` → mix[repo] · mix[inverse])."""
    weight = 1.0
    for tag in group.split("/"):
        weight *= mix.get(tag, 1.0)
    return weight


def validate_mix(mix: dict[str, float]) -> dict[str, float]:
    for tag, weight in mix.items():
        if not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"mix weight of {tag!r} must be a number >= 0, got {weight!r}")
    return {**MIX_DEFAULTS, **{tag: float(weight) for tag, weight in mix.items()}}


def epoch_order(groups: np.ndarray, weights: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """Sample indices of epoch `epoch` in order: group codes per sample, one weight per code."""
    chosen = []
    for code, weight in enumerate(weights):
        members = np.flatnonzero(groups == code)
        whole, fraction = divmod(float(weight), 1.0)
        chosen.extend([members] * int(whole))
        extra = int(round(fraction * len(members)))
        if extra:
            rng = np.random.default_rng([seed, epoch, 1, code])
            chosen.append(np.sort(rng.choice(members, extra, replace=False)))
    every = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    return every[np.random.default_rng([seed, epoch, 0]).permutation(len(every))]


def batch_slice(batch: int, global_batch_size: int, rank: int, world_size: int, total: int) -> tuple[int, int]:
    """Rank `rank`'s positions [start, stop) of global batch `batch` in an epoch order of `total` samples;
    the last batch may be short, and a rank's share of it empty."""
    share = global_batch_size // world_size
    start = batch * global_batch_size + rank * share
    return min(start, total), min(start + share, total)
