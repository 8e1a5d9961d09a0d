"""`tracegen ablate`: one traced corpus, several data formats, the same model trained on each, scored on the same cuts.

    tracegen ablate --traces DATASET --out DIR --variant NAME=OPTIONS ... [--size cpu|gpu] [--tokens N] ...

For each variant (pipeline/ablate/variants.py), from the traces of DATASET — never traced again:
1. its trajectories (`tracegen trajectories` with its sampling options) and its packed samples (`tracegen pack`
   with its format options and the ablation's `--holdout`: the same held-out sources for every variant);
2. its evaluation trajectories: the base's sampling (seed, per-trace count, both directions) written in the
   variant's own format, so every variant is scored on the same trajectories and actions;
3. `tracegen pretrain` of the same model with the same seed for the same number of *tokens* (steps = tokens ÷
   (global batch × seq_len)), with a learning curve on its evaluation trajectories (`--eval-every`); one CPU
   worker trains in this process (`Ablation.train`);
4. `tracegen evaluate --per-cut` on the first `eval_trajectories` held-out trajectories of its evaluation data
   (the same trajectories for every variant, whatever each one's context fits).
Data made once serves every variant that needs it (OUT/data/trajectories-HASH, OUT/data/packed-HASH, by their
configs' hashes); each variant's run is OUT/runs/NAME and its results OUT/results/NAME.json. Everything resumes:
the jobs skip their finished units, a run its checkpoints, an evaluation whose results are at the run's last step.
The comparison (pipeline/ablate/compare.py) is made of the cuts every variant scored: OUT/ablation.md (the table),
OUT/curves.png and OUT/ablation.json.
"""

import hashlib
import json
import os
import sys
from dataclasses import dataclass

from pipeline.ablate.settings import AblationSettings
from pipeline.ablate.variants import Variant
from pipeline.engine.job import run_job
from pipeline.engine.orchestrate import start_ray
from pipeline.engine.reader import open_dataset
from pipeline.kinds.pack import PackKind
from pipeline.kinds.resample import ResampleConfig, ResampleKind
from pipeline.loader import load_tokenizer
from pipeline.model.checkpoints import METRICS
from pipeline.model.network import ModelConfig
from pipeline.pretrain.config import TrainConfig
from pipeline.stages.trajectories import SamplingSettings

STATE = "ablation.json"


@dataclass(frozen=True)
class VariantData:
    """Where a variant's data is: its packed samples and the trajectories it is scored on."""

    packed: str
    evaluation: str


class Ablation:
    """The ablation at OUT over the traces of a dataset: makes each variant's data, trains and scores it."""

    def __init__(self, traces: str, out: str, settings: AblationSettings, address: str | None = None):
        dataset = open_dataset(traces, "give the --out of a tracing job (trace-functions, trace-repos)", "--traces")
        if not dataset.shards("traces"):
            raise ValueError(f"--traces {traces!r} has no traces table: give the --out of a tracing job")
        self.traces, self.out, self.settings, self.address = dataset.uri, os.path.abspath(out), settings, address

    def check_state(self, variants: list[Variant]) -> None:
        """Write OUT/ablation.json's settings, or check that the ablation there is this one (more variants may be
        added to it; a variant of the same name must have the same options)."""
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, STATE)
        wanted = {"traces": self.traces, "settings": self.settings.as_dict()}
        named = {variant.name: variant.options for variant in variants}
        if os.path.exists(path):
            with open(path) as handle:
                existing = json.load(handle)
            changed = [key for key in wanted if existing.get(key) != wanted[key]]
            changed += [
                f"variant {name} ({existing['options'][name]!r} -> {options!r})"
                for name, options in named.items()
                if existing.get("options", {}).get(name, options) != options
            ]
            if changed:
                raise ValueError(
                    f"{self.out} is an ablation of other {', '.join(changed)}: choose a new --out, or give the same "
                    f"traces, settings and variants to resume it"
                )
            named = {**existing.get("options", {}), **named}
        write_json(path, {**wanted, "options": named})

    def data(self, variant: Variant, base: Variant) -> VariantData:
        trajectories = self._trajectories(variant.sampling)
        config = variant.pack_config(self.settings.holdout)
        packed = self._path("packed", f"{os.path.basename(trajectories)}/{config.hash()}")
        run_job(PackKind(), trajectories, config, packed, address=self.address)
        return VariantData(packed, self._trajectories(variant.evaluation_sampling(base)))

    def _trajectories(self, sampling: SamplingSettings) -> str:
        config = ResampleConfig(sampling=sampling)
        path = self._path("trajectories", config.hash())
        run_job(ResampleKind(), self.traces, config, path, address=self.address)
        return path

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.out, "data", f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:12]}")

    def train_config(self, variant: Variant, data: VariantData) -> TrainConfig:
        settings = self.settings
        steps = settings.steps(variant.seq_len)
        return TrainConfig(
            data=data.packed,
            out=os.path.join(self.out, "runs", variant.name),
            steps=steps,
            global_batch_size=settings.global_batch_size,
            lr=settings.lr,
            warmup_steps=min(settings.warmup_steps, steps),
            seed=settings.seed,
            log_every=max(1, steps // 100),
            checkpoint_every=max(1, steps // 4),
            compile=settings.compile,
            eval_every=-(-steps // settings.curve_points) if settings.curve_points else 0,
            eval_cuts=settings.curve_cuts,
            eval_data=data.evaluation,
            model=dict(settings.model),
            **variant.objective,
        )

    def train(self, config: TrainConfig) -> None:
        """`tracegen pretrain`'s Ray Train run; one CPU worker on this machine runs its loop in this process instead
        (`train_worker` itself: the same steps and losses, bench/pretrain.py, without Ray Train's start per run)."""
        from pipeline.pretrain.launch import check_run_config, pretrain
        from pipeline.pretrain.train import train_worker

        if _finished(config):
            return
        if self.settings.workers == 1 and not self.settings.gpu and self.address is None:
            check_run_config(config)
            train_worker(config.as_dict())
        else:
            pretrain(config, workers=self.settings.workers, gpu=self.settings.gpu, address=self.address)

    def evaluate(self, variant: Variant, config: TrainConfig, data: VariantData) -> str:
        """The variant's results file, scored now unless it holds the run's last step already."""
        from pipeline.evaluation.evaluate import evaluate

        path = os.path.join(self.out, "results", f"{variant.name}.json")
        if _results_step(path) != config.steps:
            settings = self.settings
            evaluate(
                config.out,
                data.evaluation,
                path,
                max_cuts=None,
                max_trajectories=settings.eval_trajectories,
                max_new_tokens=settings.max_new_tokens,
                per_cut=True,
            )
        return path

    def run(self, variants: list[Variant]) -> list[dict]:
        """Every variant made, trained and scored, in order; what the comparison reads of each."""
        self.check_state(variants)
        start_ray(self.address, None)
        done = []
        for number, variant in enumerate(variants, 1):  # each its jobs', training's and evaluation's progress lines
            print(f"tracegen: ablate: variant {number} of {len(variants)}, {variant.name}", file=sys.stderr, flush=True)
            data = self.data(variant, variants[0])
            config = self.train_config(variant, data)
            self.train(config)
            results = self.evaluate(variant, config, data)
            vocab_size = load_tokenizer(data.packed).vocab_size
            model = ModelConfig(vocab_size=vocab_size, seq_len=variant.seq_len, **config.model)
            done.append(
                {
                    "variant": variant,
                    "run": config.out,
                    "results": results,
                    "steps": config.steps,
                    "model": model,
                    "workers": self.settings.workers,
                }
            )
        return done

    def device(self) -> str:
        """The accelerator the runs trained on, by name ("cpu" without --gpu)."""
        if not self.settings.gpu:
            return "cpu"
        import torch

        return torch.cuda.get_device_name(0)


def _finished(config: TrainConfig) -> bool:
    """Whether the run at config.out logged its last step already (a finished run is not started again)."""
    path = os.path.join(config.out, METRICS)
    if not os.path.isfile(path):
        return False
    with open(path) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return any(record.get("step") == config.steps and "loss" in record for record in records)


def _results_step(path: str) -> int | None:
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        return json.load(handle).get("step")


def write_json(path: str, value) -> None:
    """Write `value` to `path` whole or not at all (a temporary name, then a rename)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
    os.replace(path + ".tmp", path)
