"""Learning curves: `--eval-every` scores the same held-out slice at fixed steps, so two runs with one seed write the
same curve, and `tracegen report RUN` draws it with the baselines."""

import json
import os

import pytest
from training_helpers import train

from pipeline.cli import main
from pipeline.pretrain.config import TrainConfig


def curve(packed: str, dataset: str, out: str) -> list[dict]:
    metrics = train(packed, out, 10, warmup_steps=2, eval_every=5, eval_cuts=6, eval_data=dataset)
    return [record for record in metrics if "eval" in record]


def test_two_runs_with_one_seed_write_the_same_curve_and_report_draws_it(tiny_packed, tiny_dataset, tmp_path, capsys):
    first = curve(tiny_packed, tiny_dataset, str(tmp_path / "a"))
    assert first == curve(tiny_packed, tiny_dataset, str(tmp_path / "b"))
    assert [point["step"] for point in first] == [5, 10]
    assert [point["tokens"] for point in first] == [5 * 4 * 256, 10 * 4 * 256]  # steps x batch x seq_len
    for point in first:
        scored = point["eval"]
        assert scored["split"] == "all" and 6 <= scored["cuts"] == sum(r["cuts"] for r in scored["per_action"].values())
        assert set(scored["baselines"]) == {"copy", "next_line", "oracle_structure"}
        assert 0.0 <= scored["state"] <= 1.0
    assert first[0]["eval"]["baselines"] == first[1]["eval"]["baselines"]  # the same cuts at every point

    assert main(["report", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().out.strip().endswith("report.html")
    for name in ("report.html", "loss.png", "exact_match.png"):
        assert os.path.getsize(tmp_path / "a" / name) > 0, name
    page = (tmp_path / "a" / "report.html").read_text()
    assert all(action in page for action in first[-1]["eval"]["per_action"]) and "oracle_structure" in page
    with open(tmp_path / "a" / "metrics.jsonl") as handle:
        assert sum("loss" in json.loads(line) for line in handle) == 10


def test_a_curve_needs_a_dataset_to_score():
    with pytest.raises(ValueError, match="--eval-data"):
        TrainConfig(data="packed", out="run", eval_every=5)
