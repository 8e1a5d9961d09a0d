"""What an ablation holds the same for every variant: held-out sources, model, seed, token budget, evaluation.

Two presets (`--size`): `cpu`, the default, fits about 30 minutes for a base and three variants on two CPU cores
(the pretrain stage's default model, 2 layers × 128, ~0.45 M parameters; 4 M tokens each, ~4.5 min of training at
~15 k tokens/s, and ~2.5 min of scoring); `gpu`, a model a GPU makes meaningful (14 layers × 768, ~99 M parameters;
1 B tokens each, bf16, torch.compile). Any of the preset's values can be given on its own (`--tokens`, `--layers`,
...).
"""

from dataclasses import asdict, dataclass, field, fields, replace


@dataclass(frozen=True)
class AblationSettings:
    holdout: float = 0.25  # share of sources held out (by source: pipeline/format/split.py), the same for all
    seed: int = 0  # the model's init and the sample order
    tokens: int = 4_000_000  # training tokens per variant: steps = tokens / (global batch × seq_len)
    seq_len: int = 1024  # each variant's, unless it sets its own --seq-len
    global_batch_size: int = 16
    lr: float = 3e-3
    warmup_steps: int = 20
    model: dict = field(default_factory=lambda: {"layers": 2, "width": 128, "heads": 4})
    eval_trajectories: int = 300  # held-out trajectories each variant's final evaluation walks (the same for all)
    curve_points: int = 4  # learning-curve points per variant (the last at the last step)
    curve_cuts: int = 100  # cuts each learning-curve point scores
    max_new_tokens: int = 256
    workers: int = 1
    gpu: bool = False
    compile: bool = False

    def __post_init__(self):
        if type(self.holdout) is not float or not 0.0 < self.holdout < 1.0:
            raise ValueError(
                f"--holdout must be a fraction in (0, 1): the variants are scored on held-out sources, "
                f"got {self.holdout!r}"
            )
        positive = ("tokens", "seq_len", "global_batch_size", "eval_trajectories", "curve_cuts", "max_new_tokens")
        for name in (*positive, "workers"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive int, got {value!r}")
        if type(self.curve_points) is not int or self.curve_points < 0:
            raise ValueError(f"--curve-points must be an int >= 0 (0: no learning curve), got {self.curve_points!r}")

    def steps(self, seq_len: int) -> int:
        """Optimizer steps that spend the token budget at `seq_len` (at least 1)."""
        return max(1, self.tokens // (self.global_batch_size * seq_len))

    def as_dict(self) -> dict:
        return asdict(self)


SIZES = {
    "cpu": AblationSettings(),
    "gpu": AblationSettings(
        tokens=1_000_000_000,
        seq_len=2048,
        global_batch_size=64,
        lr=6e-4,
        warmup_steps=300,
        model={"layers": 14, "width": 768, "heads": 12},
        eval_trajectories=2000,
        curve_points=10,
        curve_cuts=1000,
        gpu=True,
        compile=True,
    ),
}


def sized(size: str, **given) -> AblationSettings:
    """The preset `size` with the values given (None: the preset's) in place; ValueError for an unknown size."""
    if size not in SIZES:
        raise ValueError(f"--size must be one of {', '.join(SIZES)}, got {size!r}")
    names = {f.name for f in fields(AblationSettings)}
    model = {key: given.pop(key) for key in ("layers", "width", "heads") if given.get(key) is not None}
    preset = SIZES[size]
    chosen = {key: value for key, value in given.items() if key in names and value is not None}
    return replace(preset, **chosen, model={**preset.model, **model})
