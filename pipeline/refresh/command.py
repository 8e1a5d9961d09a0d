"""`tracegen refresh` options → the config of each kind it runs → the refresh → its exit status.

The per-kind options are the kinds' own (sandbox, repr mode, sampling, the benchmark files of `--decontaminate`),
so a refresh computes what the separate jobs would, and each kind's config hash (hence which units re-run) moves
only with its settings.
"""

import argparse

from pipeline.compact import add_compaction_options, compaction_from
from pipeline.kinds.functions import FunctionsConfig
from pipeline.kinds.go import GoConfig
from pipeline.kinds.options import (
    add_decontaminate_arguments,
    add_interpreter_arguments,
    add_memory_options,
    add_repr_mode_argument,
    add_sampling_arguments,
    add_sandbox_argument,
    decontaminator_from,
    python_from,
    repr_limits_from,
    sampling_from,
)
from pipeline.kinds.repos import ReposConfig, add_tests_per_unit_argument
from pipeline.refresh.plan import RefreshConfigs
from pipeline.refresh.sequence import refresh
from pipeline.stages.go.runs import GoSettings
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.trace_functions import TraceSettings


def add_refresh_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", required=True, help="TOML file of [[repo]], [[functions]], [[go]] tables")
    parser.add_argument("--root", required=True, help="versioned dataset root (versions/N, _log/, LATEST)")
    add_sandbox_argument(parser)
    add_interpreter_arguments(parser)
    parser.add_argument("--keep", type=int, default=7, help="committed versions to keep (default 7)")
    parser.add_argument("--chunk-size", type=int, default=FunctionsConfig.chunk_size, help="function records per unit")
    parser.add_argument("--go-runs", type=int, default=GoSettings.runs, help="runs per Go program")
    add_repr_mode_argument(parser)
    add_tests_per_unit_argument(parser)
    add_sampling_arguments(parser)
    add_decontaminate_arguments(parser)
    parser.add_argument("--cache-dir", default="", help="git mirrors and pip downloads (default ~/.cache/tracegen)")
    parser.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all cores)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")
    parser.add_argument("--no-report", action="store_true", help="do not write the published version's report")
    add_memory_options(parser, default="each unit's kind's")
    add_compaction_options(parser)


def configs_from(args: argparse.Namespace) -> RefreshConfigs:
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    reprs, sampling = repr_limits_from(args), sampling_from(args)
    python, backend = python_from(args), args.tracer_backend
    decontaminator = decontaminator_from(args)  # read once: the functions and the repos kinds share it
    return RefreshConfigs(
        functions=FunctionsConfig(
            sandbox=args.sandbox,
            python=python,
            chunk_size=args.chunk_size,
            trace=TraceSettings(reprs=reprs, tracer_backend=backend),
            sampling=sampling,
            decontaminate=decontaminator,
        ),
        repos=ReposConfig(
            sandbox=args.sandbox,
            python=python,
            trace=RepoTraceSettings(reprs=reprs, tracer_backend=backend),
            sampling=sampling,
            tests_per_unit=args.tests_per_unit,
            cache_dir=args.cache_dir,
            decontaminate=decontaminator,
        ),
        go=GoConfig(sandbox=args.sandbox, go=GoSettings(runs=args.go_runs)),
    )


def run_refresh(args: argparse.Namespace) -> int:
    """Print the one-line summary; exit 0 published or nothing new, 1 failed units (listed in it)."""
    result = refresh(
        args.sources,
        args.root,
        configs_from(args),
        keep=args.keep,
        workers=args.workers,
        address=args.ray_address,
        report=not args.no_report,
        compaction=compaction_from(args),
        task_memory_mb=args.task_memory_mb,
        oom_retries=args.oom_retries,
    )
    print(result.summary())
    return 1 if result.failed else 0
