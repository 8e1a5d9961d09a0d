"""Command-line options that several kinds share, each defined once: the sandbox and trajectory sampling."""

import argparse

from pipeline.sandbox import BACKENDS
from pipeline.stages.trajectories import SamplingSettings


def add_sandbox_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sandbox",
        choices=BACKENDS,
        default="bwrap",
        help="where untrusted code runs (default bwrap; process runs it without isolation)",
    )


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=SamplingSettings.seed, help="seed of every random choice")
    parser.add_argument(
        "--per-trace", type=int, default=SamplingSettings.per_trace, help="trajectories per trace and direction"
    )


def sampling_from(args: argparse.Namespace) -> SamplingSettings:
    return SamplingSettings(seed=args.seed, per_trace=args.per_trace)
