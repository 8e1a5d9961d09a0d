"""`tracegen ablate`: its options and what it prints. torch is imported only when it runs (the train extra)."""

import argparse

from pipeline.ablate.settings import SIZES, AblationSettings, sized
from pipeline.ablate.variants import parse_variants
from pipeline.pretrain.command import require_train_extra


def add_ablate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--traces", required=True, help="a dataset with traces (the --out of a tracing job)")
    parser.add_argument("--out", required=True, help="the ablation's directory: data, runs, results, the table")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=OPTIONS",
        help="a variant beside the base (repeat): its options of tracegen trajectories (--seed --per-trace "
        "--full-locals --directions), pack (--seq-len --tokenizer --vocab-size --loss) and pretrain (--go-objective "
        "--go-balance), e.g. --variant 'full=--full-locals' --variant 'bytes=--tokenizer bytes'",
    )
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="cpu",
        help="cpu: the default model, 4 M tokens per variant (about 30 min for four variants on 2 cores); gpu: "
        "~99 M parameters, 1 B tokens per variant, bf16 on --workers GPUs",
    )
    preset = AblationSettings()
    parser.add_argument("--holdout", type=float, default=preset.holdout, help="share of sources held out of training")
    parser.add_argument("--seed", type=int, default=preset.seed, help="the model's init and sample order")
    given = parser.add_argument_group("the --size preset's values, one by one")
    for name, kind, what in (
        ("tokens", int, "training tokens per variant"),
        ("seq-len", int, "tokens per sample (a variant's own --seq-len wins)"),
        ("global-batch-size", int, "samples per step"),
        ("lr", float, "peak learning rate"),
        ("warmup-steps", int, "learning-rate warm-up"),
        ("layers", int, "transformer blocks"),
        ("width", int, "model width"),
        ("heads", int, "attention heads"),
        ("eval-trajectories", int, "held-out trajectories each variant's final evaluation walks"),
        ("curve-points", int, "learning-curve points per variant (0: none)"),
        ("curve-cuts", int, "held-out cuts each learning-curve point scores"),
        ("workers", int, "Ray Train workers (CPU processes, or GPUs with --size gpu)"),
    ):
        given.add_argument(f"--{name}", type=kind, default=None, help=what)
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")


def run_ablate(args: argparse.Namespace) -> int:
    require_train_extra("ablate")
    from pipeline.ablate.compare import compare, markdown
    from pipeline.ablate.run import Ablation

    names = ("tokens", "seq_len", "global_batch_size", "lr", "warmup_steps", "eval_trajectories", "curve_points")
    names += ("curve_cuts", "workers", "layers", "width", "heads")
    settings = sized(args.size, holdout=args.holdout, seed=args.seed, **{name: getattr(args, name) for name in names})
    variants = parse_variants(args.variant, settings.seq_len)
    ablation = Ablation(args.traces, args.out, settings, args.ray_address)
    comparison = compare(ablation.out, ablation.run(variants), ablation.device())
    print(markdown(comparison))
    print(f"ablation -> {ablation.out}/ablation.md, curves.png, ablation.json")
    return 0
