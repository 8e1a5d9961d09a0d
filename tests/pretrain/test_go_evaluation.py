"""The Go metrics of `tracegen evaluate`: every exact-prefix row of a real Go dataset is scored, and the
figures are what their definitions allow (KL ≥ 0, ECE and accuracies in [0, 1]); `--go-balance` weighs by
the packed data's own target types."""

import json
import os
from collections import Counter

from go_helpers import requires_go

from pipeline.engine.job import run_job
from pipeline.engine.reader import table_rows
from pipeline.evaluation.evaluate import evaluate
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.pretrain.config import TrainConfig
from pipeline.pretrain.launch import check_run_config
from pipeline.pretrain.train import train_worker
from pipeline.stages.pack.packing import PackSettings
from schemas.go_next_event import OUTCOMES


@requires_go
def test_every_exact_prefix_is_scored_with_accuracy_calibration_and_kl(tiny_go_dataset, tmp_path):
    packed = str(tmp_path / "packed")
    run_job(PackKind(), tiny_go_dataset, PackConfig(packing=PackSettings(seq_len=4096)), packed)
    run = str(tmp_path / "run")
    config = TrainConfig(
        data=packed, out=run, steps=2, global_batch_size=1, warmup_steps=0, checkpoint_every=2, go_balance="inverse"
    )
    check_run_config(config)
    train_worker(config.as_dict())
    results = evaluate(run, tiny_go_dataset, os.path.join(run, "results.json"), split="all")
    exact = [row for row in table_rows(tiny_go_dataset, "go_next_event") if row["prefix_kind"] == "exact"]
    go = results["go"]
    assert go["examples"] == len(exact) > 0
    assert go["kl"] >= 0.0 and 0.0 <= go["ece"] <= 1.0 and 0.0 <= go["top1_accuracy"] <= 1.0
    assert set(go["accuracy_by_event"]) <= set(OUTCOMES)
    assert go["macro_accuracy"] == sum(go["accuracy_by_event"].values()) / len(go["accuracy_by_event"])
    with open(os.path.join(run, "go_balance.json")) as handle:
        balance = json.load(handle)
    steps = [step for row in table_rows(tiny_go_dataset, "go_trajectories") for step in row["steps"]]
    targets = exact + steps  # every Go position: an example's next event and each trajectory step
    written = Counter(
        max(OUTCOMES, key=lambda name, r=row: (r["counts"][name], -OUTCOMES.index(name))) for row in targets
    )
    assert balance["target_types"] == {name: written[name] for name in OUTCOMES}
    assert abs(sum(balance["weights"][t] * n for t, n in written.items()) - len(targets)) < 1e-6
    assert results["per_action"] == {} and results["trajectories"] == 0
