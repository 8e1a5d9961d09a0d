"""The Go term is the KL from the empirical next-event distribution to the model's: zero exactly when they agree."""

import numpy as np
import torch

from pipeline.evaluation.go_metrics import expected_calibration_error, kl_divergence
from pipeline.pretrain.objective import Targets, balance_weights, kl_to_empirical, loss_sum_of


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
    targets = Targets(mask, torch.tensor([0]), torch.tensor([2]), probs, torch.ones(1))
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
    targets = Targets(mask, torch.tensor([0, 0]), torch.tensor([1, 3]), probs, torch.ones(2))
    log_q = torch.log_softmax(logits[0, [0, 2]][:, outcome_ids], dim=-1)
    kl = float(kl_to_empirical(log_q, probs).sum())
    line = torch.nn.functional.cross_entropy(logits[0, [1, 3]], torch.tensor([2, 3]), reduction="sum")
    assert abs(float(loss_sum_of(logits, ids, targets, outcome_ids, "kl")) - (kl + float(line))) < 1e-5


def test_calibration_error_is_zero_for_a_calibrated_model():
    assert expected_calibration_error(np.array([1.0, 1.0]), np.array([1.0, 1.0])) == 0.0
    assert expected_calibration_error(np.array([0.9, 0.9]), np.array([0.0, 0.0])) > 0.8


def test_go_balance_weights_average_one_over_the_data_and_favour_rare_types():
    counts = np.array([6, 2, 0])
    assert np.array_equal(balance_weights(counts, "none"), np.ones(3))
    inverse = balance_weights(counts, "inverse")  # N / (K f_t): 8 / (2 * 6), 8 / (2 * 2), unused type 0
    assert np.allclose(inverse, [2 / 3, 2.0, 0.0])
    sqrt = balance_weights(counts, "sqrt")  # proportional to f^-1/2, scaled so that sum f_t w_t = N
    scale = 8 / (6 * 6**-0.5 + 2 * 2**-0.5)
    assert np.allclose(sqrt, [scale * 6**-0.5, scale * 2**-0.5, 0.0])
    assert np.isclose((sqrt * counts).sum(), 8) and np.isclose((inverse * counts).sum(), 8)


def test_each_go_position_s_term_is_scaled_by_its_weight_under_kl_and_under_ce():
    vocab, outcome_ids = 8, torch.tensor([4, 5, 6])
    ids = torch.tensor([[1, 5, 2, 4]])
    logits = torch.randn(1, 4, vocab, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[False, True, False, True]])
    probs = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    rows, positions = torch.tensor([0, 0]), torch.tensor([1, 3])
    log_q = torch.log_softmax(logits[0, [0, 2]][:, outcome_ids], dim=-1)
    kl = kl_to_empirical(log_q, probs)
    weighted = Targets(mask, rows, positions, probs, torch.tensor([2.0, 0.5]))
    assert torch.isclose(loss_sum_of(logits, ids, weighted, outcome_ids, "kl"), 2.0 * kl[0] + 0.5 * kl[1])
    ce = torch.nn.functional.cross_entropy(logits[0, [0, 2]], torch.tensor([5, 4]), reduction="none")
    assert torch.isclose(loss_sum_of(logits, ids, weighted, outcome_ids, "ce"), 2.0 * ce[0] + 0.5 * ce[1])
