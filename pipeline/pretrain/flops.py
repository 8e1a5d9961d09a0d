"""Model FLOPs utilisation: the training FLOPs a run's tokens/s stands for, against its accelerator's peak.

FLOPs per trained token: 6 per non-embedding parameter (forward and backward of every matrix multiply) plus
attention's 12 × layers × seq_len × width (PaLM, appendix B); the tied embedding's lookup costs nothing and its
output projection is counted as one matrix (vocab × width, 6 per parameter). The peak is the dense bf16 figure
of the device's data sheet, looked up by name; None for a device not in the table (and for CPUs).
"""

from pipeline.model.network import ModelConfig

# Dense bf16 tensor-core peaks (FLOP/s, without sparsity), by a substring of torch.cuda.get_device_name().
PEAK_BF16 = (
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10G", 70e12),
    ("L4", 121e12),
)


def flops_per_token(model: ModelConfig) -> float:
    matrices = model.parameters() - model.width * (2 * model.layers + 1)  # norm weights do no multiply
    return 6.0 * matrices + 12.0 * model.layers * model.seq_len * model.width


def peak_flops(device_name: str) -> float | None:
    for name, peak in PEAK_BF16:
        if name in device_name:
            return peak
    return None


def mfu(model: ModelConfig, tokens_per_s: float, device_name: str, devices: int = 1) -> float | None:
    """The share of `devices` × the device's peak that `tokens_per_s` (all devices together) uses."""
    peak = peak_flops(device_name)
    return None if peak is None else tokens_per_s * flops_per_token(model) / (peak * devices)
