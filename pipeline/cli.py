"""The `tracegen` command line: one subcommand per job kind (pipeline.kinds.KINDS), plus `inspect`, `export`,
`refresh` (a new dataset version with only what is new), `report` (report.html and plots of a version),
`compact` (merge a dataset's small shards into large files), `pretrain` (train on a packed dataset) and
`evaluate` (score a trained model).

Exit status: 0 done; 1 some units failed (the dataset holds the others; run again to complete it);
2 bad input or configuration, or the machine lacks something (named, with the fix), before any work.
"""

import argparse
import sys

from pipeline.compact import add_compact_arguments, add_compaction_options, compaction_from, run_compact
from pipeline.engine.errors import SetupError
from pipeline.engine.job import JobIncomplete, run_job
from pipeline.engine.versions import CommitConflict
from pipeline.export import DIALECTS, export
from pipeline.kinds import KINDS, kind_named
from pipeline.kinds.options import add_memory_options
from pipeline.pretrain.command import add_evaluate_arguments, add_pretrain_arguments, run_evaluate, run_pretrain
from pipeline.refresh.command import add_refresh_arguments, run_refresh


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Where a job writes and runs; never part of its config hash."""
    parser.add_argument("--out", required=True, help="dataset directory or URI (s3://..., gs://...)")
    parser.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all cores)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")
    parser.add_argument("--overwrite", action="store_true", help="replace a dataset made with another config at --out")
    add_memory_options(parser)
    add_compaction_options(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracegen", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for kind in KINDS:
        command = commands.add_parser(kind.command, help=kind.help)
        kind.add_arguments(command)
        add_run_options(command)
    inspect = commands.add_parser("inspect", help="summarise a dataset")
    inspect.add_argument("out", help="dataset directory or URI")
    inspect.add_argument("--examples", type=int, default=1, help="decoded examples to print")
    export = commands.add_parser("export", help="write a dataset's rows as another project's examples (JSON lines)")
    export.add_argument("--dialect", required=True, choices=sorted(DIALECTS), help="whose format to write")
    export.add_argument("--data", required=True, help="dataset directory or URI")
    export.add_argument("--out", required=True, help="the JSON-lines file to write")
    export.add_argument(
        "--runtime-goroutines",
        action="store_true",
        help="weave: re-parse the stored raw traces, keeping the runtime's goroutines as the seed's pipeline does",
    )
    refresh = commands.add_parser("refresh", help="publish a new dataset version with only what is new (nightly)")
    add_refresh_arguments(refresh)
    report = commands.add_parser("report", help="write report.html and PNG plots beside a version's manifest")
    report.add_argument("out", help="a versioned root (its latest version), versions/N, or a dataset directory")
    add_compact_arguments(commands.add_parser("compact", help="merge a dataset's small shards into large files"))
    add_pretrain_arguments(commands.add_parser("pretrain", help="train the neural debugger on a packed dataset"))
    add_evaluate_arguments(commands.add_parser("evaluate", help="score a trained model per action (and on Go)"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pipeline.inspect import summarize

    try:
        if args.command == "inspect":
            print(summarize(args.out, examples=args.examples))
            return 0
        if args.command == "refresh":
            return run_refresh(args)
        if args.command == "compact":
            return run_compact(args)
        if args.command == "pretrain":
            return run_pretrain(args)
        if args.command == "evaluate":
            return run_evaluate(args)
        if args.command == "report":
            from pipeline.report import write_report

            print(f"report -> {write_report(args.out)}")
            return 0
        if args.command == "export":
            written = export(args.dialect, args.data, args.out, runtime_goroutines=args.runtime_goroutines)
            print(f"{written} {args.dialect} examples -> {args.out}")
            return 0
        kind = kind_named(args.command)
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        source, config = kind.configure(args)
        run_job(
            kind,
            source,
            config,
            args.out,
            workers=args.workers,
            address=args.ray_address,
            overwrite=args.overwrite,
            compaction=compaction_from(args),
            task_memory_mb=args.task_memory_mb,
            oom_retries=args.oom_retries,
        )
        print(summarize(args.out))
        return 0
    except SetupError as error:
        print(f"tracegen: setup: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"tracegen: error: {error}", file=sys.stderr)
        return 2
    except JobIncomplete as error:
        print(f"tracegen: incomplete: {error}", file=sys.stderr)
        return 1
    except CommitConflict as error:
        print(f"tracegen refresh: FAILED: {error}; run again to build on it", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
