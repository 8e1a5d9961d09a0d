"""`tracegen pretrain` and `tracegen evaluate`: their options and what they print. torch is imported only
when one of them runs, so the rest of the CLI (and `make run`) never needs it; both need the `train` extra and
say so in one line when it is missing."""

import argparse
import importlib
import json
from dataclasses import fields

from pipeline.debugger.language import DIALECTS
from pipeline.engine.errors import SetupError
from pipeline.engine.options import CommandOptions
from pipeline.format.split import EVALUATION_SPLITS
from pipeline.kinds.functions import FunctionsConfig
from pipeline.kinds.options import check_tracer_backend
from pipeline.pretrain.config import GO_BALANCES, GO_OBJECTIVES, TrainConfig
from pipeline.sandbox import check_sandbox

TRAIN_MODULES = ("torch", "ray.train.torch")  # what the train extra (pyproject.toml) installs, as imported
# How --benchmark items are traced and predicted inputs run: trace-functions' own settings of these options.
TRACING = CommandOptions(
    (FunctionsConfig,),
    only=(
        *("--sandbox", "--python", "--tracer-backend"),
        *("--repr-mode", "--max-repr-chars", "--max-repr-items", "--max-repr-depth"),
    ),
)


def require_train_extra(command: str) -> None:
    """A SetupError naming the extra to install when torch or Ray Train cannot be imported."""
    for module in TRAIN_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise SetupError(
                f"tracegen {command} needs the train extra (torch, ray[train]), and {module} cannot be imported "
                f"({error}): pip install -e '.[train]' in a checkout, or pip install 'tracegen[train]'"
            ) from error


def add_objective_arguments(parser: argparse.ArgumentParser) -> None:
    """How the Go positions are scored (also an ablation's variants')."""
    parser.add_argument(
        "--go-objective",
        choices=GO_OBJECTIVES,
        default=TrainConfig.go_objective,
        help="kl: against the empirical next-event distribution (default); ce: against its most frequent event",
    )
    parser.add_argument(
        "--go-balance",
        choices=GO_BALANCES,
        default=TrainConfig.go_balance,
        help="weigh the Go term per target event type by the packed data's frequencies: none, inverse, or sqrt",
    )


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="a packed dataset (tracegen pack --out)")
    parser.add_argument("--out", required=True, help="the run directory: config, metrics.jsonl, checkpoints")
    parser.add_argument("--steps", type=int, default=TrainConfig.steps, help="optimizer steps in all")
    parser.add_argument("--global-batch-size", type=int, default=TrainConfig.global_batch_size, help="samples per step")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="samples per forward pass and rank")
    parser.add_argument("--lr", type=float, default=TrainConfig.lr, help="peak learning rate")
    parser.add_argument("--min-lr-ratio", type=float, default=TrainConfig.min_lr_ratio, help="end of the cosine")
    parser.add_argument("--warmup-steps", type=int, default=TrainConfig.warmup_steps, help="linear warm-up of the lr")
    parser.add_argument("--weight-decay", type=float, default=TrainConfig.weight_decay, help="AdamW, matrices only")
    parser.add_argument("--clip", type=float, default=TrainConfig.clip, help="gradient norm clipping")
    parser.add_argument("--seed", type=int, default=TrainConfig.seed, help="model init and sample order")
    parser.add_argument(
        "--checkpoint-every", type=int, default=TrainConfig.checkpoint_every, help="steps per checkpoint"
    )
    parser.add_argument("--log-every", type=int, default=TrainConfig.log_every, help="steps per metrics.jsonl line")
    add_objective_arguments(parser)
    parser.add_argument("--eval-every", type=int, default=0, help="learning curve: score every N steps (0: never)")
    parser.add_argument("--eval-cuts", type=int, default=TrainConfig.eval_cuts, help="cuts each curve point scores")
    parser.add_argument("--eval-data", default="", help="the dataset whose held-out trajectories the curve scores")
    parser.add_argument("--layers", type=int, default=2, help="transformer blocks")
    parser.add_argument("--width", type=int, default=128, help="model width")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (CUDA only)")
    parser.add_argument("--workers", type=int, default=1, help="Ray Train workers (CPU processes, or GPUs)")
    parser.add_argument("--gpu", action="store_true", help="one GPU per worker (NCCL)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")


def run_pretrain(args: argparse.Namespace) -> int:
    require_train_extra("pretrain")
    from pipeline.pretrain.launch import pretrain

    settings = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if f.name != "model"}
    config = TrainConfig(**settings, model={"layers": args.layers, "width": args.width, "heads": args.heads})
    metrics = pretrain(config, workers=args.workers, gpu=args.gpu, address=args.ray_address)
    with open(metrics) as handle:
        last = [record for record in map(json.loads, handle) if "loss" in record][-1]
    print(f"pretrain: step {last['step']}, loss {last['loss']:.4f}, {last['tokens_per_s']:.0f} tokens/s -> {metrics}")
    return 0


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", help="a run directory of tracegen pretrain (all but --dialect cwm)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--data", help="a dataset with trajectories (and Go tables): ROOT or DIR")
    what.add_argument(
        "--benchmark", help="a JSONL benchmark in CruxEval's shape ({id, code, input, output, entry?}): pass@1/pass@k"
    )
    parser.add_argument("--out", required=True, help="the results JSON file")
    parser.add_argument("--split", choices=EVALUATION_SPLITS, default="heldout", help="held-out sources only, or all")
    parser.add_argument("--max-cuts", type=int, default=2000, help="cut points scored at most")
    parser.add_argument(
        "--max-trajectories",
        type=int,
        default=None,
        help="walk the first N trajectories of the split, whatever fits (models with other contexts walk the same)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=256, help="tokens decoded per predicted state")
    parser.add_argument("--max-rollouts", type=int, default=200, help="Go trajectory windows rolled out at most")
    parser.add_argument(
        "--per-cut",
        action="store_true",
        help="list every scored cut in the results (its trace, direction, sample, action position; each predictor's "
        "hits), so runs on differently formatted data can be compared on their common cuts",
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of the Go rollouts (and of --samples)")
    benchmark = parser.add_argument_group("--benchmark only")
    benchmark.add_argument("--samples", type=int, default=0, help="answers sampled per item and task, for pass@k")
    benchmark.add_argument("--temperature", type=float, default=0.8, help="the temperature of --samples")
    benchmark.add_argument("--per-item", action="store_true", help="each item's answers in the results and table")
    benchmark.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="debugger",
        help="cwm: for a model of CWM's trace format, not a run: --out gets the prompts, or with --completions the "
        "results",
    )
    benchmark.add_argument("--completions", help="--dialect cwm: JSONL {id, completion} of the prompts to score")
    TRACING.add_to(parser)


def run_evaluate(args: argparse.Namespace) -> int:
    require_train_extra("evaluate")
    cwm = args.dialect == "cwm"
    if cwm != (args.run is None) or (args.completions and not cwm) or (cwm and not args.benchmark):
        raise ValueError(
            "give --run (a tracegen pretrain run) with --data or --benchmark; or --dialect cwm with --benchmark "
            "(and --completions to score), without --run"
        )
    if args.benchmark:
        return run_benchmark(args)
    from pipeline.evaluation.evaluate import evaluate, results_table

    results = evaluate(
        args.run,
        args.data,
        args.out,
        split=args.split,
        max_cuts=args.max_cuts,
        max_new_tokens=args.max_new_tokens,
        max_rollouts=args.max_rollouts,
        seed=args.seed,
        per_cut=args.per_cut,
        max_trajectories=args.max_trajectories,
    )
    print(results_table(results))
    print(f"results -> {args.out}")
    return 0


def run_benchmark(args: argparse.Namespace) -> int:
    """`tracegen evaluate --benchmark`: items traced (and predicted inputs run) as `trace-functions` would."""
    from pipeline.evaluation.benchmark import Decoding, benchmark_table, evaluate_benchmark
    from pipeline.evaluation.benchmark_cwm import score_cwm_completions, write_cwm_prompts

    (config,) = TRACING.build(args)
    check_sandbox(config.sandbox, config.python)
    check_tracer_backend(config.sandbox, config.python, config.trace.tracer_backend)
    tracing = {"sandbox": config.sandbox, "python": config.python, "trace": config.trace}
    if args.dialect == "cwm" and not args.completions:
        missing = write_cwm_prompts(args.benchmark, args.out, **tracing)
        for item, why in missing.items():
            print(f"no prompt for {item}: {why}")
        print(f"cwm prompts -> {args.out}")
        return 0
    if args.dialect == "cwm":
        results = score_cwm_completions(args.benchmark, args.completions, args.out, per_item=args.per_item, **tracing)
    else:
        decoding = Decoding(args.samples, args.temperature, args.seed, args.max_new_tokens)
        results = evaluate_benchmark(
            args.run, args.benchmark, args.out, decoding=decoding, per_item=args.per_item, **tracing
        )
    print(benchmark_table(results))
    print(f"results -> {args.out}")
    return 0
