"""Training a tiny model in-process for the pretraining tests: one worker, no Ray (`train_worker` directly)."""

import json
import os

from pipeline.pretrain.config import TrainConfig
from pipeline.pretrain.launch import check_run_config
from pipeline.pretrain.train import train_worker


def train(packed: str, out: str, steps: int, **settings) -> list[dict]:
    """Train (or resume) the run `out` on `packed` for `steps` steps; its metrics lines."""
    config = TrainConfig(data=packed, out=out, steps=steps, global_batch_size=4, checkpoint_every=steps, **settings)
    check_run_config(config)
    train_worker(config.as_dict())
    with open(os.path.join(out, "metrics.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def train_untrained(run: str, out: str) -> str:
    """A run on the same packed data as `run` whose one step changes nothing (lr 1e-9): an untrained model."""
    with open(os.path.join(run, "config.json")) as handle:
        packed = json.load(handle)["data"]
    train(packed, out, 1, lr=1e-9, warmup_steps=0)
    return out
