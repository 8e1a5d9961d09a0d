"""An ablation's variants: each a name and the options it changes, written as the commands take them.

    base                                  (always the first row: every option at its default)
    full_locals=--full-locals             (tracegen trajectories' options: --seed --per-trace --full-locals
    loss_all=--loss all                    --directions; tracegen pack's: --seq-len --tokenizer --vocab-size
    per_trace_8=--per-trace 8              --loss; tracegen pretrain's Go objective: --go-objective
    forward_only=--directions forward      --go-balance)
    bytes=--tokenizer bytes

What stays the same across variants is the ablation's, never a variant's: the traces, the held-out sources, the
model, the seed and the token budget (pipeline/ablate/settings.py). A variant's options are made from the same
settings as the commands' (SamplingSettings, PackConfig: pipeline/engine/options.py; the Go objective's from
pipeline/pretrain/command.py), so `--per-trace 8` means here what it means there.
"""

import argparse
import re
import shlex
from dataclasses import dataclass, replace

from pipeline.debugger.policy import DIRECTIONS
from pipeline.engine.options import CommandOptions
from pipeline.kinds.pack import PackConfig
from pipeline.pretrain.command import add_objective_arguments
from pipeline.stages.trajectories import SamplingSettings

BASE = "base"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# The options a variant may set, by the command that defines them.
OPTIONS = {
    "tracegen trajectories": ("--seed", "--per-trace", "--full-locals", "--directions"),
    "tracegen pack": ("--seq-len", "--tokenizer", "--vocab-size", "--loss"),
    "tracegen pretrain": ("--go-objective", "--go-balance"),
}
SETTINGS = CommandOptions(
    (SamplingSettings, PackConfig), only=OPTIONS["tracegen trajectories"] + OPTIONS["tracegen pack"]
)
FORMAT = ("packing", "tokenizer", "vocab_size")  # the PackConfig fields a variant may change


@dataclass(frozen=True)
class Variant:
    """A row of the ablation: how its trajectories are sampled, how they are packed, and its Go objective."""

    name: str
    options: str
    sampling: SamplingSettings
    pack: dict  # PackConfig fields: packing, tokenizer, vocab_size
    objective: dict  # TrainConfig fields: go_objective, go_balance

    def pack_config(self, holdout: float) -> PackConfig:
        return PackConfig(**self.pack, holdout=holdout)

    @property
    def seq_len(self) -> int:
        return self.pack["packing"].seq_len

    def evaluation_sampling(self, base: "Variant") -> SamplingSettings:
        """The trajectories this variant is scored on: the base's (its seed, per-trace count and both directions,
        so every variant is scored on the same cuts) written as this variant writes them (locals in full or as
        deltas)."""
        policy = replace(base.sampling.policy, locals_delta=self.sampling.policy.locals_delta, directions=DIRECTIONS)
        return replace(base.sampling, policy=policy)


class _OptionParser(argparse.ArgumentParser):
    """Raises what argparse would print and exit with."""

    def error(self, message: str):
        raise ValueError(message)


def _parser(seq_len: int) -> argparse.ArgumentParser:
    parser = _OptionParser(prog="variant", add_help=False, exit_on_error=False)
    SETTINGS.add_to(parser)
    add_objective_arguments(parser)
    parser.set_defaults(seq_len=seq_len)
    return parser


def parse_variant(spec: str, seq_len: int) -> Variant:
    """`NAME=OPTIONS` (or `NAME` alone: the defaults, with the ablation's `seq_len`) as a Variant; ValueError
    naming the spec and the fix."""
    name, _, options = spec.partition("=")
    name = name.strip()
    if not NAME.match(name):
        raise ValueError(
            f"variant {spec!r}: name it NAME=OPTIONS with NAME of letters, digits, '_', '.', '-' "
            f"(e.g. full_locals=--full-locals)"
        )
    try:
        words = shlex.split(options)
    except ValueError as error:
        raise ValueError(f"variant {name!r}: its options {options!r} do not split ({error})") from None
    allowed = {option for group in OPTIONS.values() for option in group}
    for word in words:
        option = word.split("=", 1)[0]
        if option.startswith("-") and option not in allowed:
            listed = "; ".join(f"{command}: {' '.join(group)}" for command, group in OPTIONS.items())
            raise ValueError(
                f"variant {name!r}: {option} is not an option a variant may change ({listed}); the traces, "
                f"held-out sources, model, seed and token budget are the ablation's own options"
            )
    try:
        args, rest = _parser(seq_len).parse_known_args(words)
    except (argparse.ArgumentError, ValueError) as error:
        raise ValueError(f"variant {name!r}: {options!r}: {error}") from None
    if rest:
        raise ValueError(f"variant {name!r}: {' '.join(rest)} is not an option value it understands")
    try:
        sampling, packing = SETTINGS.build(args)
    except ValueError as error:
        raise ValueError(f"variant {name!r}: {error}") from None
    pack = {field: getattr(packing, field) for field in FORMAT}
    objective = {"go_objective": args.go_objective, "go_balance": args.go_balance}
    return Variant(name=name, options=" ".join(words), sampling=sampling, pack=pack, objective=objective)


def parse_variants(specs: list[str], seq_len: int) -> list[Variant]:
    """The base (every default), then each spec's variant, all at the ablation's `seq_len` unless a variant sets its
    own `--seq-len`; ValueError for a repeated name."""
    variants = [parse_variant(spec, seq_len) for spec in (BASE, *specs)]
    names = [variant.name for variant in variants]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"variant names must differ ({BASE!r} is the base's): {', '.join(repeated)} given twice")
    return variants
