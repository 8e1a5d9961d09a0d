"""`tracegen pretrain`: train on a packed dataset with Ray Train (`TorchTrainer`), resuming a RUN directory.

    tracegen pretrain --data PACKED --out RUN [--steps S] [--workers W] [--gpu]

W workers (CPU processes with gloo locally; GPUs with NCCL on a cluster, `--gpu`), each running
`pipeline.pretrain.train.train_worker`. RUN holds `config.json` (what the run trains: a second start with
other data or another model is refused, since its checkpoints would not fit), `metrics.jsonl`,
`checkpoints/step_*/` and Ray Train's own files under `ray/`. On a cluster RUN and PACKED must be on storage
every node sees (a shared filesystem).
"""

import json
import os
from dataclasses import replace

from pipeline.engine.orchestrate import start_ray
from pipeline.model.checkpoints import CONFIG_FILE, METRICS
from pipeline.pretrain.config import TrainConfig

RESUMABLE = ("steps", "log_every", "checkpoint_every", "compile")  # may change between starts of one run


def check_run_config(config: TrainConfig) -> None:
    """Write RUN/config.json, or check that the run there trains the same thing (only RESUMABLE may differ)."""
    os.makedirs(config.out, exist_ok=True)
    path = os.path.join(config.out, CONFIG_FILE)
    wanted = config.as_dict()
    if os.path.exists(path):
        with open(path) as handle:
            existing = json.load(handle)
        changed = [
            f"{key} {existing.get(key)!r} -> {value!r}"
            for key, value in wanted.items()
            if key not in RESUMABLE and existing.get(key) != value
        ]
        if changed:
            raise ValueError(
                f"{config.out} is a run of another configuration ({'; '.join(changed)}): "
                f"choose a new --out, or start with the same settings to resume it"
            )
    with open(path, "w") as handle:
        json.dump(wanted, handle, indent=2, sort_keys=True)


def pretrain(config: TrainConfig, *, workers: int = 1, gpu: bool = False, address: str | None = None) -> str:
    """Train (or resume) the run; returns the path of its metrics.jsonl."""
    if type(workers) is not int or workers < 1:
        raise ValueError(f"--workers must be an int >= 1, got {workers!r}")
    config = replace(
        config,
        data=os.path.abspath(config.data),
        out=os.path.abspath(config.out),
        eval_data=config.eval_data and os.path.abspath(config.eval_data),  # Ray Train workers start elsewhere
    )
    check_run_config(config)
    start_ray(address, None if address else workers)
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from pipeline.pretrain.train import train_worker

    trainer = TorchTrainer(
        train_worker,
        train_loop_config=config.as_dict(),
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=gpu, resources_per_worker={"CPU": 1}),
        run_config=RunConfig(storage_path=os.path.join(config.out, "ray"), name="train"),
    )
    trainer.fit()
    return os.path.join(config.out, METRICS)
