"""`tracegen pretrain` on Ray Train with two CPU workers (gloo): killed after a checkpoint and started again, it
continues at the same step and loader position, and its loss curve is the one of an uninterrupted run.

The uninterrupted reference is the same training in this process on one worker: the loss of a step is the
mean over the global batch's tokens whatever the number of workers, so the two curves agree up to floating
point. The driver and its embedded Ray carry a marker and are killed by pid, like the other driver kills here.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from cluster_helpers import ROOT, kill_marked, marked_env, remove_tree

from pipeline.engine.job import run_job
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.pretrain.config import TrainConfig
from pipeline.pretrain.launch import check_run_config
from pipeline.pretrain.train import train_worker
from pipeline.stages.pack.packing import PackSettings
from pipeline.stages.trajectories import SamplingSettings

STEPS, EVERY = 12, 6
SETTINGS = {"steps": STEPS, "global_batch_size": 4, "checkpoint_every": EVERY, "warmup_steps": 2}


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_killed_ray_train_run_resumes_at_its_checkpoint_on_the_uninterrupted_curve(
    tmp_path, example_records, ray_local
):
    corpus = tmp_path / "functions.jsonl"
    chosen = [r for r in example_records if not r["id"].startswith("bad_")][:6]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    traced, packed = str(tmp_path / "data"), str(tmp_path / "packed")
    run_job(
        FunctionsKind(), str(corpus), FunctionsConfig(sandbox="process", sampling=SamplingSettings(per_trace=1)), traced
    )
    run_job(PackKind(), traced, PackConfig(packing=PackSettings(seq_len=256), tokenizer="bytes"), packed)

    reference = tmp_path / "reference"
    config = TrainConfig(data=packed, out=str(reference), **SETTINGS)
    check_run_config(config)
    train_worker(config.as_dict())

    run, mark, ray_tmp = tmp_path / "run", uuid.uuid4().hex, tempfile.mkdtemp(prefix="tgp-", dir="/tmp")
    command = [sys.executable, "-m", "pipeline.cli", "pretrain", "--data", packed, "--out", str(run), "--workers", "2"]
    command += [f"--{key.replace('_', '-')}={value}" for key, value in SETTINGS.items()]
    env = marked_env(mark, ray_tmp)
    try:
        with open(tmp_path / "killed.log", "wb") as log:
            driver = subprocess.Popen(
                command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            deadline = time.monotonic() + 240
            while not (run / "checkpoints" / f"step_{EVERY:08d}").exists():
                assert driver.poll() is None, (tmp_path / "killed.log").read_text()[-4000:]
                assert time.monotonic() < deadline, "no checkpoint in time"
                time.sleep(0.1)
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        kill_marked(mark)
        killed_at = len(metrics(run))
        assert EVERY <= killed_at < STEPS, "the run was not killed between its checkpoint and its end"

        resumed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert f"step {STEPS}" in resumed.stdout
        assert "Failed to query Ray Train Controller actor state" not in resumed.stdout + resumed.stderr
    finally:
        kill_marked(mark)
        remove_tree(ray_tmp)

    curve, expected = metrics(run), metrics(reference)
    assert [m["step"] for m in curve] == list(range(1, STEPS + 1))  # the lines after the checkpoint, logged once
    for got, want in zip(curve, expected, strict=True):
        assert (got["epoch"], got["batches_consumed"]) == (want["epoch"], want["batches_consumed"])
        assert abs(got["loss"] - want["loss"]) <= 1e-3 * want["loss"], (got, want)
    assert curve[-1]["loss"] < curve[0]["loss"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [f"step_{EVERY:08d}", f"step_{STEPS:08d}"]
