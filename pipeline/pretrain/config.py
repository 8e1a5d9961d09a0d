"""What a pretraining run trains on and how (no torch here: the CLI builds it before torch is imported)."""

from dataclasses import asdict, dataclass, field

GO_OBJECTIVES = ("kl", "ce")
GO_BALANCES = ("none", "inverse", "sqrt")  # weights of the Go term per target event type (objective.py)


@dataclass(frozen=True)
class TrainConfig:
    """What a run trains on and how. `model` holds the architecture (vocab and seq_len come from the data)."""

    data: str
    out: str
    steps: int = 200
    global_batch_size: int = 16
    micro_batch_size: int | None = None
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 20
    weight_decay: float = 0.1
    clip: float = 1.0
    seed: int = 0
    log_every: int = 1
    checkpoint_every: int = 50
    go_objective: str = "kl"
    go_balance: str = "none"
    compile: bool = False
    eval_every: int = 0  # learning curve: score a fixed held-out slice every N steps (0: never); curve.py
    eval_cuts: int = 200
    eval_data: str = ""  # the dataset (its trajectories table) the curve's cuts come from
    model: dict = field(default_factory=lambda: {"layers": 2, "width": 128, "heads": 4})

    def __post_init__(self):
        for name in ("steps", "global_batch_size", "log_every", "checkpoint_every"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive int, got {value!r}")
        if self.go_objective not in GO_OBJECTIVES:
            raise ValueError(f"--go-objective must be one of {', '.join(GO_OBJECTIVES)}, got {self.go_objective!r}")
        if self.go_balance not in GO_BALANCES:
            raise ValueError(f"--go-balance must be one of {', '.join(GO_BALANCES)}, got {self.go_balance!r}")
        if type(self.eval_every) is not int or self.eval_every < 0:
            raise ValueError(f"--eval-every must be an int >= 0 (0: no learning curve), got {self.eval_every!r}")
        if type(self.eval_cuts) is not int or self.eval_cuts < 1:
            raise ValueError(f"--eval-cuts must be a positive int, got {self.eval_cuts!r}")
        if self.eval_every and not self.eval_data:
            raise ValueError("--eval-every needs --eval-data DATASET: the dataset whose trajectories the curve scores")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"--warmup-steps must be in 0..{self.steps}, got {self.warmup_steps}")

    def as_dict(self) -> dict:
        return asdict(self)
