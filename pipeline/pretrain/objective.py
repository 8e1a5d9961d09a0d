"""The training objective: next-token cross-entropy on the loss-masked tokens, and for Go next-event tokens
the seed's distribution-aware term — KL from the empirical next-event distribution to the model's.

At a Go position p (the token after `<|go_next|>`) the model's distribution over the outcome tokens is
read from the logits at p - 1 (those predict token p), renormalised over the outcome tokens only; the
empirical distribution is the go_next_event row's counts / n. `go_objective="ce"` trains those positions
with plain cross-entropy on the token written there (the most frequent outcome) instead.

`go_balance` (the seed's "rebalancing the training data") weighs each Go position's term by its target event
type: the type of its most frequent outcome, the token pack writes there. With f_t the number of the packed
data's Go positions of type t, N their sum and K the number of types that occur, `inverse` gives w_t = N / (K f_t)
and `sqrt` w_t ∝ f_t^-1/2, both scaled so that the weights average 1 over the data's positions (the loss keeps
its scale; a rare type's positions count more, a common type's less); `none` gives every position 1.
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F


@dataclass
class Targets:
    """A micro-batch's targets as tensors: the mask of CE positions, and the Go positions with their
    empirical distributions (`go_rows`, `go_positions`: sample index and position of each; `go_probs`:
    [n_go, n_outcomes]; `go_weights`: [n_go], each position's `go_balance` weight)."""

    loss_mask: torch.Tensor
    go_rows: torch.Tensor
    go_positions: torch.Tensor
    go_probs: torch.Tensor
    go_weights: torch.Tensor


def balance_weights(type_counts: np.ndarray, balance: str) -> np.ndarray:
    """The weight of each outcome type (OUTCOMES order) under `balance` (module doc), from the packed data's
    count of Go positions per target type; types that never occur get 0 (no position carries them)."""
    counts = np.asarray(type_counts, dtype=np.float64)
    if balance == "none" or counts.sum() == 0:
        return np.ones(len(counts))
    power = {"inverse": 1.0, "sqrt": 0.5}[balance]
    raw = np.zeros_like(counts)
    raw[counts > 0] = counts[counts > 0] ** -power
    return raw * counts.sum() / (raw * counts).sum()


def outcome_log_probs(logits: torch.Tensor, targets: Targets, outcome_ids: torch.Tensor) -> torch.Tensor:
    """log q over the outcome tokens at each Go position, [n_go, n_outcomes]."""
    at = logits[targets.go_rows, targets.go_positions - 1]
    return F.log_softmax(at[:, outcome_ids].float(), dim=-1)


def kl_to_empirical(log_q: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """KL(p || q) per Go position: 0 exactly when the model's distribution is the empirical one."""
    log_p = torch.where(probs > 0, probs.clamp_min(1e-30).log(), torch.zeros_like(probs))
    return (probs * (log_p - log_q)).sum(-1)


def loss_sum_of(
    logits: torch.Tensor, input_ids: torch.Tensor, targets: Targets, outcome_ids: torch.Tensor, go_objective: str
) -> torch.Tensor:
    """The sum of the per-token losses over the loss-masked tokens (a sum, so ranks are averaged by the
    global token count): cross-entropy, except at Go positions under `kl`, where the KL term replaces it; a Go
    position's term (KL or cross-entropy) is scaled by its `go_weights` entry."""
    weights = targets.loss_mask[:, 1:].float()
    go_sum = logits.new_zeros((), dtype=torch.float32)
    if targets.go_rows.numel():
        at = (targets.go_rows, targets.go_positions - 1)
        if go_objective == "kl":
            weights[at] = 0.0
            kl = kl_to_empirical(outcome_log_probs(logits, targets, outcome_ids), targets.go_probs)
            go_sum = (kl * targets.go_weights).sum()
        else:
            weights[at] = weights[at] * targets.go_weights
    token_losses = F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), input_ids[:, 1:].reshape(-1), reduction="none"
    )
    return (token_losses * weights.reshape(-1)).sum() + go_sum
