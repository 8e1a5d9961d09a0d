"""Learning curves: with `pretrain --eval-every N --eval-data DATASET`, rank 0 scores the model in training every N
steps (and at the last step) on a fixed slice of DATASET and logs one line to RUN/metrics.jsonl.

The slice: DATASET's held-out trajectories (every trajectory when the packed data held no source out), in table
order, until `--eval-cuts` cuts are scored — the same cuts at every point and in every run of the same settings,
decoded greedily as `tracegen evaluate` does (pipeline/evaluation/evaluate.py), so two runs with the same seed write
the same curve. A point:

    {"step": S, "tokens": T, "eval": {"split", "trajectories", "cuts", "state", "per_action", "baselines"}}

T = S × global batch size × seq_len, the tokens seen (the curves' x-axis); `state` is whole-state exact match over
all the slice's cuts; `per_action` is evaluate's table; `baselines` each baseline's `per_action` on the same cuts
(constant along the curve: `tracegen report RUN` draws them as horizontal lines). Scoring reads no random state,
so it leaves training exactly as it would have been.
"""

from pipeline.evaluation.baselines import BASELINES
from pipeline.evaluation.evaluate import score_cuts
from pipeline.model.decoding import Model
from pipeline.model.network import DecoderLM
from pipeline.pretrain.config import TrainConfig

MAX_NEW_TOKENS = 256


def tokens_seen(config: TrainConfig, step: int, seq_len: int) -> int:
    return step * config.global_batch_size * seq_len


def curve_point(network: DecoderLM, config: TrainConfig, step: int, seq_len: int, device: str) -> dict:
    """Score `network` (left in the mode it was in) on the run's slice: the metrics line of step `step`."""
    model = Model(network, config.data, step, device)
    split = "heldout" if model.holdout > 0 else "all"
    training = network.training
    network.eval()
    try:
        boards, trajectories, _ = score_cuts(model, config.eval_data, split, config.eval_cuts, MAX_NEW_TOKENS)
    finally:
        network.train(training)
    scorer = boards["model"].scorer
    cuts = sum(scorer.cuts.values())
    return {
        "step": step,
        "tokens": tokens_seen(config, step, seq_len),
        "eval": {
            "split": split,
            "trajectories": trajectories,
            "cuts": cuts,
            "state": sum(scorer.hits[action]["state"] for action in scorer.cuts) / max(cuts, 1),
            "per_action": scorer.table(),
            "baselines": {name: boards[name].scorer.table() for name in BASELINES},
        },
    }
