"""Benchmark: training tokens/s of the default model on CPU, in one process and on Ray Train with 2 workers.

    .venv/bin/python bench/pretrain.py [--steps 40] [--seq-len 512] [--global-batch-size 8]

Traces the bundled examples (in bwrap: they include hostile records, a fork bomb among them), packs them, then
trains the default model (2 layers × 128) for `--steps` steps twice, side by side in one run: `train_worker` in
this process (1 worker), and `tracegen pretrain --workers 2` (Ray Train, gloo). tokens/s is the trainer's own
figure at the last step (all ranks' tokens, the loop's time: Ray Train's start-up is printed apart as wall time).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.job import run_job  # noqa: E402
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind  # noqa: E402
from pipeline.kinds.pack import PackConfig, PackKind  # noqa: E402
from pipeline.model.network import ModelConfig  # noqa: E402
from pipeline.pretrain.config import TrainConfig  # noqa: E402
from pipeline.pretrain.launch import check_run_config  # noqa: E402
from pipeline.pretrain.train import train_worker  # noqa: E402
from pipeline.stages.pack.packing import PackSettings  # noqa: E402


def last_metrics(run: Path) -> dict:
    return json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--global-batch-size", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracegen-bench-pretrain-") as tmp:
        work = Path(tmp)
        run_job(
            FunctionsKind(),
            str(ROOT / "examples" / "functions.jsonl"),
            FunctionsConfig(),
            str(work / "data"),
        )
        run_job(
            PackKind(), str(work / "data"), PackConfig(packing=PackSettings(seq_len=args.seq_len)), str(work / "packed")
        )
        settings = {"steps": args.steps, "global_batch_size": args.global_batch_size, "checkpoint_every": args.steps}
        config = TrainConfig(data=str(work / "packed"), out=str(work / "one"), **settings)
        check_run_config(config)
        start = time.perf_counter()
        train_worker(config.as_dict())
        one_wall = time.perf_counter() - start
        command = [sys.executable, "-m", "pipeline.cli", "pretrain", "--data", str(work / "packed")]
        command += ["--out", str(work / "two"), "--workers", "2"]
        command += [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()]
        start = time.perf_counter()
        subprocess.run(
            command, cwd=ROOT, check=True, capture_output=True, env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        )
        two_wall = time.perf_counter() - start
        one, two = last_metrics(work / "one"), last_metrics(work / "two")
        parameters = ModelConfig(vocab_size=300, seq_len=args.seq_len).parameters()
        print(
            f"default model ~{parameters / 1e6:.2f} M parameters, seq_len {args.seq_len}, "
            f"global batch {args.global_batch_size}, {args.steps} steps, {os.cpu_count()} cores"
        )
        for label, row, wall in (("in-process, 1 worker", one, one_wall), ("Ray Train, 2 workers", two, two_wall)):
            print(f"  {label}: {row['tokens_per_s']:>9.0f} tokens/s  loss {row['loss']:.3f}  wall {wall:.1f} s")
        print(f"  2 workers ÷ 1 worker = {two['tokens_per_s'] / one['tokens_per_s']:.2f} (wall includes Ray start-up)")


if __name__ == "__main__":
    main()
