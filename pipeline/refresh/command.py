"""`tracegen refresh` options → the config of each kind it runs → the refresh → its exit status.

The per-kind options are the kinds' own, made from the settings their configs declare (sandbox, repr mode,
sampling, the benchmark files of `--decontaminate`, ...: `SETTINGS`), so a refresh computes what the separate jobs
would, and each kind's config hash (hence which units re-run) moves only with its settings.
"""

import argparse

from pipeline.compact import add_compaction_options, compaction_from
from pipeline.engine.options import CommandOptions
from pipeline.kinds.functions import FunctionsConfig
from pipeline.kinds.go import GoConfig
from pipeline.kinds.options import add_memory_options
from pipeline.kinds.repos import ReposConfig
from pipeline.refresh.plan import RefreshConfigs
from pipeline.refresh.sequence import refresh

# The kinds' settings a refresh offers, by their flags (the others keep their defaults); the Go kind's runs are
# --go-runs here, beside the Python kinds' options.
SETTINGS = CommandOptions(
    (FunctionsConfig, ReposConfig, GoConfig),
    only=(
        *("--sandbox", "--python", "--tracer-backend", "--chunk-size", "--tests-per-unit", "--cache-dir"),
        *("--repr-mode", "--max-repr-chars", "--max-repr-items", "--max-repr-depth"),
        *("--seed", "--per-trace", "--full-locals", "--directions"),
        *("--decontaminate", "--decontaminate-threshold", "--runs"),
    ),
    renamed={"--runs": "--go-runs"},
)


def add_refresh_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", required=True, help="TOML file of [[repo]], [[functions]], [[go]] tables")
    parser.add_argument("--root", required=True, help="versioned dataset root (versions/N, _log/, LATEST)")
    parser.add_argument("--keep", type=int, default=7, help="committed versions to keep (default 7)")
    SETTINGS.add_to(parser)
    parser.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all cores)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")
    parser.add_argument("--no-report", action="store_true", help="do not write the published version's report")
    add_memory_options(parser, default="each unit's kind's")
    add_compaction_options(parser)


def configs_from(args: argparse.Namespace) -> RefreshConfigs:
    """Each kind's config from the offered settings; the values two kinds share are made once (the benchmark
    files are read once)."""
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    functions, repos, go = SETTINGS.build(args)
    return RefreshConfigs(functions=functions, repos=repos, go=go)


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
