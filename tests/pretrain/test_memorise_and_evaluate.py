"""The evaluation tells a model that memorised a tiny dataset (near 100% per action) from an untrained one
(near 0%) on the same trajectories, and the loss of a real training run goes down."""

import json

import pytest
from training_helpers import train, train_untrained

from pipeline.evaluation.evaluate import evaluate


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
    learned = evaluate(run, tiny_dataset, str(tmp_path / "learned.json"), split="all", per_cut=True)
    untrained_run = train_untrained(run, str(tmp_path / "untrained"))
    untrained = evaluate(untrained_run, tiny_dataset, str(tmp_path / "untrained.json"), split="all")
    assert learned["per_action"].keys() == untrained["per_action"].keys()
    assert {"step_into", "inv_step_call"} <= learned["per_action"].keys()
    cuts = sum(row["cuts"] for row in learned["per_action"].values())
    assert cuts >= 10 and learned["cuts_skipped"] == untrained["cuts_skipped"]
    for action, row in learned["per_action"].items():
        assert row["state"] >= 0.75, (action, row)
        assert untrained["per_action"][action]["state"] == 0.0, action
    assert learned["input_prediction"]["state"] >= 0.75
    for name, baseline in learned["baselines"].items():  # the baselines are scored on the model's own cuts
        assert {a: r["cuts"] for a, r in baseline["per_action"].items()} == {
            a: r["cuts"] for a, r in learned["per_action"].items()
        }, name
        assert baseline == untrained["baselines"][name]
    assert (
        learned["baselines"]["copy"]["per_action"]["step_into"]["state"] < learned["per_action"]["step_into"]["state"]
    )
    assert json.loads((tmp_path / "learned.json").read_text()) == learned
    assert "cuts" not in untrained  # without per_cut
    check_per_cut(learned)


def test_max_cuts_scores_at_most_that_many_cuts_the_first_ones_of_an_unbounded_run(
    memorised, tiny_dataset, tmp_path, capsys
):
    run, _ = memorised
    every = evaluate(run, tiny_dataset, str(tmp_path / "all.json"), split="all", per_cut=True, max_cuts=None)["cuts"]
    first = len([cut for cut in every if cut["trace_id"] == every[0]["trace_id"] and cut["direction"] == "forward"])
    assert 1 < first + 1 < len(every)
    for limit in (1, first + 1):  # within the first trajectory, and one cut into the second
        bounded = evaluate(run, tiny_dataset, str(tmp_path / "bounded.json"), split="all", per_cut=True, max_cuts=limit)
        assert sum(row["cuts"] for row in bounded["per_action"].values()) == limit
        assert bounded["cuts"] == every[:limit]
        assert f"tracegen: evaluate: cuts {limit} of {limit} " in capsys.readouterr().err  # its progress line


def test_training_shows_its_progress(tiny_packed, tmp_path, capsys):
    train(tiny_packed, str(tmp_path / "run"), 2, warmup_steps=0)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("tracegen: pretrain: step 2 of 2 ") and " tokens/s" in last


def test_a_held_out_evaluation_needs_data_packed_with_a_holdout(memorised, tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match="--holdout"):
        evaluate(memorised[0], tiny_dataset, str(tmp_path / "r.json"))


def check_per_cut(results: dict) -> None:
    """`--per-cut` names every scored cut once, and its hits add up to each predictor's tables."""
    cuts = results["cuts"]
    keys = [(cut["trace_id"], cut["direction"], cut["sample_index"], cut["k"]) for cut in cuts]
    assert len(set(keys)) == len(keys) == sum(row["cuts"] for row in results["per_action"].values())
    for predictor, table in [("model", results["per_action"])] + [
        (name, board["per_action"]) for name, board in results["baselines"].items()
    ]:
        for action, row in table.items():
            mine = [cut["hits"][predictor] for cut in cuts if cut["action"] == action]
            assert len(mine) == row["cuts"]
            for component in ("state", "event", "source", "locals", "arg"):
                assert sum(hit[component] for hit in mine) / len(mine) == row[component], (predictor, action)
    inputs = [cut for cut in cuts if cut["view"] == "input"]
    assert len(inputs) == results["input_prediction"]["cuts"]
