"""The evaluation tells a model that memorised a tiny dataset (near 100% per action) from an untrained one
(near 0%) on the same trajectories, and the loss of a real training run goes down."""

import json
import os

import pytest

from pipeline.pretrain.config import TrainConfig
from pipeline.pretrain.evaluate import evaluate
from pipeline.pretrain.launch import check_run_config
from pipeline.pretrain.train import train_worker


def train(packed: str, out: str, steps: int, **settings) -> list[dict]:
    config = TrainConfig(data=packed, out=out, steps=steps, global_batch_size=4, checkpoint_every=steps, **settings)
    check_run_config(config)
    train_worker(config.as_dict())
    with open(os.path.join(out, "metrics.jsonl")) as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def memorised(tiny_packed, tmp_path_factory) -> tuple[str, list[dict]]:
    out = str(tmp_path_factory.mktemp("memorised"))
    return out, train(tiny_packed, out, 300, warmup_steps=10, weight_decay=0.0, log_every=10)


def test_training_lowers_the_loss_and_logs_each_step(memorised):
    _, metrics = memorised
    assert [m["step"] for m in metrics] == list(range(10, 301, 10))
    assert metrics[-1]["loss"] < 0.05 < 2.0 < metrics[0]["loss"]
    assert all(m["tokens_per_s"] > 0 and m["lr"] > 0 for m in metrics)


def test_a_memorised_model_scores_near_one_and_an_untrained_one_near_zero(memorised, tiny_dataset, tmp_path):
    run, _ = memorised
    learned = evaluate(run, tiny_dataset, str(tmp_path / "learned.json"), split="all")
    untrained_run = str(tmp_path / "untrained")
    train(memorised_packed(run), untrained_run, 1, lr=1e-9, warmup_steps=0)
    untrained = evaluate(untrained_run, tiny_dataset, str(tmp_path / "untrained.json"), split="all")
    assert learned["per_action"].keys() == untrained["per_action"].keys()
    assert {"step_into", "inv_step_call"} <= learned["per_action"].keys()
    cuts = sum(row["cuts"] for row in learned["per_action"].values())
    assert cuts >= 10 and learned["cuts_skipped"] == untrained["cuts_skipped"]
    for action, row in learned["per_action"].items():
        assert row["state"] >= 0.75, (action, row)
        assert untrained["per_action"][action]["state"] == 0.0, action
    assert learned["input_prediction"]["state"] >= 0.75
    assert json.loads((tmp_path / "learned.json").read_text()) == learned


def test_a_held_out_evaluation_needs_data_packed_with_a_holdout(memorised, tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match="--holdout"):
        evaluate(memorised[0], tiny_dataset, str(tmp_path / "r.json"))


def memorised_packed(run: str) -> str:
    with open(os.path.join(run, "config.json")) as handle:
        return json.load(handle)["data"]
