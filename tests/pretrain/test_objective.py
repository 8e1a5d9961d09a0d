"""The Go term is the KL from the empirical next-event distribution to the model's: zero exactly when they agree."""

import numpy as np
import torch

from pipeline.pretrain.evaluate import expected_calibration_error, kl_divergence
from pipeline.pretrain.objective import Targets, kl_to_empirical, loss_sum_of


def test_kl_is_zero_when_the_model_predicts_the_empirical_distribution_and_positive_otherwise():
    empirical = torch.tensor([[0.5, 0.25, 0.25, 0.0]])
    assert float(kl_to_empirical(empirical.clamp_min(1e-30).log(), empirical)[0]) == 0.0
    assert float(kl_to_empirical(torch.full((1, 4), 0.25).log(), empirical)[0]) > 0.0
    p = np.array([0.5, 0.25, 0.25, 0.0])
    assert kl_divergence(p, p.copy()) == 0.0 and kl_divergence(p, np.full(4, 0.25)) > 0.0


def test_the_go_position_s_loss_is_its_kl_term_under_kl_and_its_cross_entropy_under_ce():
    vocab, outcome_ids = 8, torch.tensor([4, 5, 6])
    ids = torch.tensor([[1, 2, 5, 3]])
    logits = torch.zeros(1, 4, vocab)
    logits[0, 1, 4:7] = torch.tensor([0.0, 1.0, 0.0])  # position 2 (token 5) is predicted from position 1
    mask = torch.tensor([[False, False, True, False]])
    probs = torch.softmax(torch.tensor([0.0, 1.0, 0.0]), dim=0)[None]
    targets = Targets(mask, torch.tensor([0]), torch.tensor([2]), probs)
    assert abs(float(loss_sum_of(logits, ids, targets, outcome_ids, "kl"))) < 1e-6  # the model says exactly p
    cross_entropy = float(torch.nn.functional.cross_entropy(logits[0, 1][None], torch.tensor([5])))
    assert abs(float(loss_sum_of(logits, ids, targets, outcome_ids, "ce")) - cross_entropy) < 1e-6


def test_several_go_positions_in_one_document_each_add_their_kl_term_and_the_lines_their_cross_entropy():
    # a trajectory document: two steps, each a type token (a Go position) followed by one more predicted token
    vocab, outcome_ids = 8, torch.tensor([4, 5, 6])
    ids = torch.tensor([[1, 5, 2, 6, 3]])
    logits = torch.randn(1, 5, vocab, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[False, True, True, True, True]])
    probs = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]])
    targets = Targets(mask, torch.tensor([0, 0]), torch.tensor([1, 3]), probs)
    log_q = torch.log_softmax(logits[0, [0, 2]][:, outcome_ids], dim=-1)
    kl = float(kl_to_empirical(log_q, probs).sum())
    line = torch.nn.functional.cross_entropy(logits[0, [1, 3]], torch.tensor([2, 3]), reduction="sum")
    assert abs(float(loss_sum_of(logits, ids, targets, outcome_ids, "kl")) - (kl + float(line))) < 1e-5


def test_calibration_error_is_zero_for_a_calibrated_model():
    assert expected_calibration_error(np.array([1.0, 1.0]), np.array([1.0, 1.0])) == 0.0
    assert expected_calibration_error(np.array([0.9, 0.9]), np.array([0.0, 0.0])) > 0.8
