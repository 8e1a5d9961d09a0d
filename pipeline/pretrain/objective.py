"""The training objective: next-token cross-entropy on the loss-masked tokens, and for Go next-event tokens
the seed's distribution-aware term — KL from the empirical next-event distribution to the model's.

At a Go position p (the token after `<|go_next|>`) the model's distribution over the outcome tokens is
read from the logits at p - 1 (those predict token p), renormalised over the outcome tokens only; the
empirical distribution is the go_next_event row's counts / n. `go_objective="ce"` trains those positions
with plain cross-entropy on the token written there (the most frequent outcome) instead.
"""

from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass
class Targets:
    """A micro-batch's targets as tensors: the mask of CE positions, and the Go positions with their
    empirical distributions (`go_rows`, `go_positions`: sample index and position of each; `go_probs`:
    [n_go, n_outcomes])."""

    loss_mask: torch.Tensor
    go_rows: torch.Tensor
    go_positions: torch.Tensor
    go_probs: torch.Tensor


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
    global token count): cross-entropy, except at Go positions under `kl`, where the KL term replaces it."""
    mask = targets.loss_mask[:, 1:].clone()
    go_sum = logits.new_zeros((), dtype=torch.float32)
    if targets.go_rows.numel() and go_objective == "kl":
        mask[targets.go_rows, targets.go_positions - 1] = False
        go_sum = kl_to_empirical(outcome_log_probs(logits, targets, outcome_ids), targets.go_probs).sum()
    token_losses = F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), input_ids[:, 1:].reshape(-1), reduction="none"
    )
    return (token_losses * mask.reshape(-1).float()).sum() + go_sum
