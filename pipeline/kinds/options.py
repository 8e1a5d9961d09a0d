"""What several kinds share, defined once: the sandbox setting and its option, the interpreter and tracer backend
options, the repr options, the trajectory sampling options, the Go trajectory window options, the decontamination
options, the memory options of every job and the refresh.
"""

import argparse
import os
import sys
from dataclasses import dataclass

from pipeline.debugger.policy import DIRECTIONS, PolicyConfig
from pipeline.engine.config import KindConfig
from pipeline.engine.errors import SetupError
from pipeline.engine.memory import OOM_RETRIES
from pipeline.sandbox import BACKENDS
from pipeline.sandbox.interpreters import describe, resolve_python
from pipeline.stages.decontaminate import Decontaminator
from pipeline.stages.go import trajectories as go_trajectories
from pipeline.stages.trace_functions import REPR_MODES, TRACER_BACKENDS, ReprLimits
from pipeline.stages.trajectories import SamplingSettings


@dataclass(frozen=True)
class SandboxedConfig(KindConfig):
    """The config base of a kind whose units run untrusted code: which sandbox backend runs it."""

    sandbox: str = "bwrap"

    def __post_init__(self):
        super().__post_init__()
        if self.sandbox not in BACKENDS:
            raise ValueError(f"unknown sandbox {self.sandbox!r}: choose one of {', '.join(BACKENDS)}")


def add_sandbox_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sandbox",
        choices=BACKENDS,
        default="bwrap",
        help="where untrusted code runs (default bwrap; process runs it without isolation)",
    )


def add_interpreter_arguments(parser: argparse.ArgumentParser) -> None:
    """Which Python runs the traced code, and which tracer backend records it (both in the config hash)."""
    parser.add_argument(
        "--python",
        default=None,
        help="the interpreter that runs the traced code in the sandbox: a path, a version pyenv has (3.12) or a "
        "command (python3.12); default: this one (bwrap, process); docker always runs its image's",
    )
    parser.add_argument(
        "--tracer-backend",
        choices=TRACER_BACKENDS,
        default="auto",
        help="how the tracer gets its events: sys.monitoring (CPython 3.12+, much cheaper where nothing is "
        "recorded) or sys.settrace; auto (default) takes sys.monitoring where the interpreter has it",
    )


def python_from(args: argparse.Namespace) -> str | None:
    """The resolved --python (a real path), or None for the sandbox's own interpreter."""
    if args.python is None:
        return None
    if args.sandbox == "docker":
        raise ValueError("--python does not apply to --sandbox docker: it runs its image's Python")
    return resolve_python(args.python)


def check_tracer_backend(sandbox: str, python: str | None, backend: str) -> None:
    """A forced `monitoring` backend needs CPython 3.12+ inside the sandbox: a SetupError before any work."""
    if backend != "monitoring":
        return
    if sandbox == "docker":
        return  # the image's Python: the runner inside refuses a backend it lacks (a failure row per chunk)
    interpreter = python or os.path.realpath(sys.executable)  # what bwrap and process run (Sandbox.python)
    found = describe(interpreter)
    if not found.has_monitoring:
        raise SetupError(
            f"--tracer-backend monitoring needs CPython 3.12 or later; {interpreter} is "
            f"{found.implementation} {'.'.join(map(str, found.version))}: choose --python 3.12 or --tracer-backend auto"
        )


def add_repr_mode_argument(parser: argparse.ArgumentParser) -> None:
    """How values are rendered: the mode and the caps (ReprLimits, part of the job's config hash)."""
    parser.add_argument(
        "--repr-mode",
        choices=REPR_MODES,
        default=ReprLimits.mode,
        help="how values of the program's classes are rendered: structural (from their state, no program "
        "code run) or user (their own __repr__; only for code known to have pure reprs)",
    )
    for name, what in (
        ("chars", "characters of one value's repr (a longer one is cut, marked …)"),
        ("items", "items shown per container, fields per object"),
        ("depth", "levels of nested containers shown"),
    ):
        parser.add_argument(
            f"--max-repr-{name}",
            type=int,
            default=getattr(ReprLimits, f"max_{name}"),
            help=f"cap on the {what}; default %(default)s (schemas/reprs.md)",
        )


def repr_limits_from(args: argparse.Namespace) -> ReprLimits:
    return ReprLimits(args.max_repr_chars, args.max_repr_items, args.max_repr_depth, args.repr_mode)


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=SamplingSettings.seed, help="seed of every random choice")
    parser.add_argument(
        "--per-trace", type=int, default=SamplingSettings.per_trace, help="trajectories per trace and direction"
    )
    parser.add_argument(
        "--full-locals",
        action="store_true",
        help="write every frame's locals in full, as CWM does (default: the tracegen locals delta)",
    )
    parser.add_argument(
        "--directions",
        choices=("both", *DIRECTIONS),
        default="both",
        help="the trees trajectories walk: both (default), forward only, or inverse only",
    )


def sampling_from(args: argparse.Namespace) -> SamplingSettings:
    directions = DIRECTIONS if args.directions == "both" else (args.directions,)
    policy = PolicyConfig(locals_delta=not args.full_locals, directions=directions)
    return SamplingSettings(seed=args.seed, per_trace=args.per_trace, policy=policy)


def add_trajectory_arguments(parser: argparse.ArgumentParser) -> None:
    """--go-window and --go-stride: the go_trajectories windows (trace-go and rederive-go)."""
    parser.add_argument(
        "--go-window",
        type=int,
        default=go_trajectories.WINDOW,
        help=f"steps per go_trajectories window (default {go_trajectories.WINDOW})",
    )
    parser.add_argument(
        "--go-stride",
        type=int,
        default=go_trajectories.STRIDE,
        help=f"steps between the starts of a run's consecutive windows (default {go_trajectories.STRIDE})",
    )


def add_memory_options(parser: argparse.ArgumentParser, default: str = "the kind's") -> None:
    """Memory per unit (pipeline/engine/memory.py): what each unit's Ray task asks for and is stopped past."""
    parser.add_argument(
        "--task-memory-mb",
        type=int,
        default=None,
        help=f"MB for one unit's Ray worker: Ray reserves it, the unit is stopped past it (default: {default})",
    )
    parser.add_argument(
        "--oom-retries",
        type=int,
        default=OOM_RETRIES,
        help=f"times a unit stopped for memory is run again before it is recorded failed (default {OOM_RETRIES})",
    )


def add_decontaminate_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark files whose items' near-copies are dropped (pipeline/stages/decontaminate.py), and the MinHash
    rule's threshold; both in the config hash."""
    parser.add_argument(
        "--decontaminate",
        nargs="+",
        default=[],
        metavar="FILE",
        help="benchmark JSONL files ({id, code, input, output, entry?}): drop what matches an item (MinHash of the "
        "dedup's shingles, a shared 13-token run, or a function record's input and output); each drop is a "
        "`contaminated` row",
    )
    parser.add_argument(
        "--decontaminate-threshold",
        type=float,
        default=Decontaminator.threshold,
        help="estimated Jaccard similarity from which code matches a benchmark item (default %(default)s)",
    )


def decontaminator_from(args: argparse.Namespace) -> Decontaminator:
    """The benchmark files read and indexed on the driver (a ValueError names a bad file or line)."""
    return Decontaminator.from_files(args.decontaminate, args.decontaminate_threshold)
