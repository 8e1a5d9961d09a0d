"""Model FLOPs utilisation from tokens/s: the FLOPs per token of a config worked out by hand, a known device's peak,
none for a CPU."""

import pytest

from pipeline.model.network import ModelConfig
from pipeline.pretrain.flops import flops_per_token, mfu, peak_flops


def test_flops_per_token_are_six_per_matrix_parameter_plus_attention():
    model = ModelConfig(vocab_size=10, seq_len=8, layers=1, width=4, heads=2)  # hidden 16 (8/3 x 4, rounded to 8s)
    matrices = 10 * 4 + 4 * 4 * 4 + 3 * 4 * 16  # embedding, q/k/v/out, the SwiGLU MLP
    assert flops_per_token(model) == 6 * matrices + 12 * 1 * 8 * 4


def test_mfu_is_the_share_of_the_devices_peak():
    model = ModelConfig(vocab_size=300, seq_len=2048, layers=14, width=768, heads=12)
    assert 95e6 < model.parameters() < 105e6  # the gpu preset's ~99 M
    assert peak_flops("NVIDIA H100 80GB HBM3") == peak_flops("NVIDIA H200") == 989e12
    share = mfu(model, 100_000.0, "NVIDIA H100 80GB HBM3", devices=2)
    assert share == pytest.approx(100_000 * flops_per_token(model) / (2 * 989e12))
    assert mfu(model, 100_000.0, "cpu") is None
