"""The training loop of `tracegen pretrain`: one function that every Ray Train worker runs.

Each worker builds the model (pipeline/model/network.py), wraps it for DDP (`ray.train.torch.prepare_model`:
gloo on CPU, NCCL on GPUs), and reads its rank's slice of every global batch from `PackedLoader`. The loss of a
step is the mean over all loss tokens of the global batch (each rank's sum divided by the all-reduced count),
so the curve does not depend on the number of workers. AdamW (weight decay on matrices only), linear warm-up
then cosine decay, gradient clipping, bf16 autocast and optional `torch.compile` on CUDA.

Checkpoints (`RUN/checkpoints/step_{S:08d}/state.pt`, written by rank 0 into a temporary directory and renamed,
so a checkpoint is there whole or not at all) hold the model, optimizer, scheduler, RNG and loader state;
a run started again on the same RUN resumes from the newest one and cuts `metrics.jsonl` back to that step,
so a killed run followed by a resumed one logs the same lines as an uninterrupted run.
"""

import json
import math
import os
import random
import shutil
import time

import numpy as np
import torch

from pipeline.engine.progress import Steps
from pipeline.loader.packed import PackedLoader
from pipeline.model.checkpoints import CHECKPOINTS, METRICS, STATE_FILE, latest_checkpoint
from pipeline.model.network import DecoderLM, ModelConfig
from pipeline.pretrain.config import TrainConfig
from pipeline.pretrain.curve import curve_point, tokens_seen
from pipeline.pretrain.objective import Targets, balance_weights, loss_sum_of
from schemas.go_next_event import OUTCOMES

GO_BALANCE = "go_balance.json"


def learning_rate(step: int, config: TrainConfig) -> float:
    """The multiplier of `lr` at `step`: linear warm-up, then cosine decay to `min_lr_ratio`."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def model_config(config: TrainConfig, loader: PackedLoader) -> ModelConfig:
    return ModelConfig(vocab_size=loader.tokenizer().vocab_size, seq_len=loader.shards.seq_len, **config.model)


def build_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (norm weights and other vectors are not decayed)."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": matrices, "weight_decay": config.weight_decay}, {"params": vectors, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95), eps=1e-8)


def to_targets(batch: dict, device: torch.device, type_weights: np.ndarray) -> Targets:
    """The micro-batch's Go soft targets as flat tensors (pads dropped), each weighted by its target type's
    entry of `type_weights` (OUTCOMES order), and its loss mask."""
    rows, columns = np.nonzero(batch["go_positions"] >= 0)
    counts = batch["go_counts"][rows, columns].astype(np.float64)
    runs = np.maximum(batch["go_n"][rows, columns], 1)[:, None]
    return Targets(
        loss_mask=torch.from_numpy(batch["loss_mask"]).to(device),
        go_rows=torch.from_numpy(rows.astype(np.int64)).to(device),
        go_positions=torch.from_numpy(batch["go_positions"][rows, columns]).to(device),
        go_probs=torch.from_numpy(counts / runs).float().to(device),
        go_weights=torch.from_numpy(type_weights[counts.argmax(axis=1)]).float().to(device),
    )


def forward_inputs(batch: dict, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.from_numpy(batch["input_ids"]).to(device),
        "document_ids": torch.from_numpy(batch["document_ids"]).to(device),
        "position_ids": torch.from_numpy(batch["position_ids"]).to(device),
    }


class Stream:
    """The loader's micro-batches across epochs: the next global batch of this rank as a list."""

    def __init__(self, loader: PackedLoader):
        self.loader = loader
        self.iterator = iter(loader)

    def next_batch(self) -> list[dict]:
        micro = []
        while True:
            try:
                item = next(self.iterator)
            except StopIteration:
                self.loader.set_epoch(self.loader.epoch + 1)
                self.iterator = iter(self.loader)
                continue
            micro.append(item)
            if item["batch_done"]:
                return micro


def train_worker(config_dict: dict) -> None:
    """Run on every Ray Train worker (also callable in-process with world size 1, without Ray)."""
    config = TrainConfig(**config_dict)
    rank, world = _topology()
    torch.manual_seed(config.seed)
    trainer = Trainer(config, _open_loader(config, rank, world), rank, world)
    step = trainer.resumed_step
    stream = Stream(trainer.loader)
    elapsed, tokens = 0.0, 0  # seconds in training steps (reading the batch included; curve points, checkpoints not)
    progress = Steps("pretrain: step", config.steps, start=step) if rank == 0 else None
    while step < config.steps:
        started = time.perf_counter()
        loss, norm, lr, read = trainer.step(stream.next_batch())
        elapsed += time.perf_counter() - started
        tokens += read
        step += 1
        if progress is not None:
            progress.advance(note=f"loss {loss:.4f}  {tokens / elapsed if elapsed > 0 else 0:,.0f} tokens/s")
        if rank == 0 and (step % config.log_every == 0 or step == config.steps):
            _log(
                config.out,
                {
                    "step": step,
                    "tokens": tokens_seen(config, step, trainer.loader.shards.seq_len),
                    "loss": loss,
                    "lr": lr,
                    "grad_norm": float(norm),
                    "tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
                    "epoch": trainer.loader.epoch,
                    "batches_consumed": trainer.loader.batches_consumed,
                },
            )
        if rank == 0 and config.eval_every and (step % config.eval_every == 0 or step == config.steps):
            _log(
                config.out, curve_point(trainer.model, config, step, trainer.loader.shards.seq_len, str(trainer.device))
            )
        if rank == 0 and (step % config.checkpoint_every == 0 or step == config.steps):
            _save(config.out, step, trainer.model, trainer.optimizer, trainer.scheduler, trainer.loader, config)
        _barrier()


def _open_loader(config: TrainConfig, rank: int, world: int) -> PackedLoader:
    """This rank's loader of the packed data; a ValueError when the data is less than one global batch."""
    loader = PackedLoader(
        config.data,
        config.global_batch_size,
        rank=rank,
        world_size=world,
        seed=config.seed,
        micro_batch_size=config.micro_batch_size,
        drop_last=True,  # every rank gets a full share of every batch, so no rank waits on a collective alone
    )
    if loader.batches_per_epoch() == 0:
        raise ValueError(
            f"{config.data} holds fewer packed samples than one global batch ({config.global_batch_size}): "
            f"lower --global-batch-size or pack more data"
        )
    return loader


class Trainer:
    """One worker's model on its device, its optimizer and learning-rate schedule, and its loader, resumed from
    the run's newest checkpoint (`resumed_step`) and wrapped for DDP; `step` trains them on a global batch."""

    def __init__(self, config: TrainConfig, loader: PackedLoader, rank: int, world: int):
        self.config, self.loader, self.rank, self.world = config, loader, rank, world
        self.model = DecoderLM(model_config(config, loader))
        self.device = _device()
        self.model.to(self.device)
        self.optimizer = build_optimizer(self.model, config)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: learning_rate(step, config))
        self.resumed_step = self._resume()
        self.wrapped = _prepare(self.model)
        if config.compile and self.device.type == "cuda":
            self.wrapped = torch.compile(self.wrapped)
        self.outcome_ids = torch.from_numpy(loader.go_event_token_ids()).to(self.device)
        self.type_weights = np.ones(len(OUTCOMES))  # the Go term's weight per target type (--go-balance)
        if config.go_balance != "none":
            counts = loader.shards.go_target_types()
            self.type_weights = balance_weights(counts, config.go_balance)
            if rank == 0:
                _write_balance(config, counts, self.type_weights)

    def _resume(self) -> int:
        """Load the newest checkpoint of the run, if any (rank 0 cuts the metrics back to it): its step, or 0."""
        checkpoint = latest_checkpoint(self.config.out)
        if checkpoint is None:
            return 0
        state = torch.load(checkpoint, map_location=self.device, weights_only=False)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.loader.load_state_dict(state["loader"])
        _set_rng(state["rng"])
        if self.rank == 0:
            _truncate_metrics(self.config.out, state["step"])
        return state["step"]

    def step(self, micro_batches: list[dict]) -> tuple[float, torch.Tensor, float, int]:
        """One optimizer step on this rank's micro-batches of a global batch: the loss (the mean over the global
        batch's loss tokens), the gradient norm, the learning rate the step used and the tokens read by all
        ranks."""
        config, device, world = self.config, self.device, self.world
        counts = torch.tensor([float(b["loss_mask"][:, 1:].sum()) for b in micro_batches], device=device)
        targets = [to_targets(b, device, self.type_weights) for b in micro_batches]
        local_count = counts.sum() + (
            sum(int(t.go_rows.numel()) for t in targets) if config.go_objective == "kl" else 0
        )
        global_count = _all_reduce(local_count.clone()).clamp_min(1.0)
        self.optimizer.zero_grad(set_to_none=True)
        step_loss = torch.zeros((), device=device)
        tokens = 0
        for batch, target in zip(micro_batches, targets, strict=True):
            inputs = forward_inputs(batch, device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = self.wrapped(**inputs)
            loss_sum = loss_sum_of(logits, inputs["input_ids"], target, self.outcome_ids, config.go_objective)
            # DDP averages gradients over ranks: scale so the result is the gradient of the global token mean
            (loss_sum * world / global_count).backward()
            step_loss += loss_sum.detach()
            tokens += int(batch["input_ids"].size) * world
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.clip)
        lr = float(self.scheduler.get_last_lr()[0])  # the rate this step uses
        self.optimizer.step()
        self.scheduler.step()
        return float(_all_reduce(step_loss) / global_count), norm, lr, tokens


def _topology() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _device() -> torch.device:
    try:
        import ray.train.torch

        return ray.train.torch.get_device()
    except (ImportError, RuntimeError):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _prepare(model: torch.nn.Module) -> torch.nn.Module:
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return model
    import ray.train.torch

    return ray.train.torch.prepare_model(model, move_to_device=False)


def _all_reduce(value: torch.Tensor) -> torch.Tensor:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(value)
    return value


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def _rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def _set_rng(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def _save(out: str, step: int, model, optimizer, scheduler, loader: PackedLoader, config: TrainConfig) -> None:
    final = os.path.join(out, CHECKPOINTS, f"step_{step:08d}")
    staging = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    state = {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "loader": loader.state_dict(),
        "rng": _rng_state(),
        "config": config.as_dict(),
        "model_config": model.config.as_dict(),
    }
    torch.save(state, os.path.join(staging, STATE_FILE))
    os.replace(staging, final)


def _write_balance(config: TrainConfig, counts: np.ndarray, weights: np.ndarray) -> None:
    """RUN/go_balance.json: the packed data's Go positions per target type and the weights they give."""
    record = {
        "go_balance": config.go_balance,
        "target_types": dict(zip(OUTCOMES, counts.tolist(), strict=True)),
        "weights": dict(zip(OUTCOMES, weights.tolist(), strict=True)),
    }
    with open(os.path.join(config.out, GO_BALANCE), "w") as handle:
        json.dump(record, handle, indent=1)


def _log(out: str, record: dict) -> None:
    with open(os.path.join(out, METRICS), "a") as handle:
        handle.write(json.dumps(record) + "\n")


def _truncate_metrics(out: str, step: int) -> None:
    """Drop the lines a killed run logged after its last checkpoint: the resumed run logs them again."""
    path = os.path.join(out, METRICS)
    if not os.path.exists(path):
        return
    with open(path) as handle:
        kept = [line for line in handle if line.strip() and json.loads(line)["step"] <= step]
    with open(path, "w") as handle:
        handle.writelines(kept)
