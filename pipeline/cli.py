"""The `tracegen` command line: one subcommand per job kind (pipeline.kinds.KINDS), plus `inspect`, `export`,
`refresh` (a new dataset version with only what is new), `report` (report.html and plots of a version),
`compact` (merge a dataset's small shards into large files), `pretrain` (train on a packed dataset),
`evaluate` (score a trained model) and `ablate` (train and score the same model on variants of the data format).

Exit status: 0 done; 1 some units failed (the dataset holds the others; run again to complete it);
2 bad input or configuration, or the machine lacks something (named, with the fix), before any work.
"""

import argparse
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.ablate.command import add_ablate_arguments, run_ablate
from pipeline.compact import add_compact_arguments, add_compaction_options, compaction_from, run_compact
from pipeline.engine.errors import SetupError
from pipeline.engine.job import JobIncomplete, run_job
from pipeline.engine.kind import JobKind
from pipeline.engine.versions import CommitConflict
from pipeline.export import DIALECTS, export
from pipeline.kinds import KINDS
from pipeline.kinds.options import add_memory_options
from pipeline.model.checkpoints import METRICS
from pipeline.pretrain.command import add_evaluate_arguments, add_pretrain_arguments, run_evaluate, run_pretrain
from pipeline.refresh.command import add_refresh_arguments, run_refresh


@dataclass(frozen=True)
class Command:
    """One `tracegen` subcommand: its name and help line, its options, and `run`, which does it and returns the
    exit status (errors it raises are turned into statuses by `main`)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Where a job writes and runs; never part of its config hash."""
    parser.add_argument("--out", required=True, help="dataset directory or URI (s3://..., gs://...)")
    parser.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all cores)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")
    parser.add_argument("--overwrite", action="store_true", help="replace a dataset made with another config at --out")
    add_memory_options(parser)
    add_compaction_options(parser)


def add_kind_arguments(kind: JobKind, parser: argparse.ArgumentParser) -> None:
    kind.add_arguments(parser)
    add_run_options(parser)


def run_kind(kind: JobKind, args: argparse.Namespace) -> int:
    """Run a job of `kind` and print the summary of the dataset it wrote."""
    from pipeline.inspect import summarize

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


def kind_command(kind: JobKind) -> Command:
    return Command(
        kind.command, kind.help, functools.partial(add_kind_arguments, kind), functools.partial(run_kind, kind)
    )


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", help="dataset directory or URI")
    parser.add_argument("--examples", type=int, default=1, help="decoded examples to print")


def run_inspect(args: argparse.Namespace) -> int:
    from pipeline.inspect import summarize

    print(summarize(args.out, examples=args.examples))
    return 0


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dialect", required=True, choices=sorted(DIALECTS), help="whose format to write")
    parser.add_argument("--data", required=True, help="dataset directory or URI")
    parser.add_argument("--out", required=True, help="the JSON-lines file to write")
    parser.add_argument(
        "--runtime-goroutines",
        action="store_true",
        help="weave: re-parse the stored raw traces, keeping the runtime's goroutines as the seed's pipeline does",
    )


def run_export(args: argparse.Namespace) -> int:
    written = export(args.dialect, args.data, args.out, runtime_goroutines=args.runtime_goroutines)
    print(f"{written} {args.dialect} examples -> {args.out}")
    return 0


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out",
        help="a versioned root (its latest version), versions/N, a dataset directory, or a pretrain run directory "
        "(its learning curves)",
    )


def run_report(args: argparse.Namespace) -> int:
    if os.path.isfile(os.path.join(args.out, METRICS)):
        from pipeline.pretrain.curve_report import write_run_report

        print(f"report -> {write_run_report(args.out)}")
        return 0
    from pipeline.version_report import write_report

    print(f"report -> {write_report(args.out)}")
    return 0


# Every subcommand, in the order `tracegen --help` lists them: the job kinds, then the others.
COMMANDS = (
    *(kind_command(kind) for kind in KINDS),
    Command("inspect", "summarise a dataset", add_inspect_arguments, run_inspect),
    Command(
        "export",
        "write a dataset's rows as another project's examples (JSON lines)",
        add_export_arguments,
        run_export,
    ),
    Command(
        "refresh",
        "publish a new dataset version with only what is new (nightly)",
        add_refresh_arguments,
        run_refresh,
    ),
    Command(
        "report",
        "write report.html and PNG plots beside a version's manifest, or of a pretrain run",
        add_report_arguments,
        run_report,
    ),
    Command("compact", "merge a dataset's small shards into large files", add_compact_arguments, run_compact),
    Command("pretrain", "train the neural debugger on a packed dataset", add_pretrain_arguments, run_pretrain),
    Command(
        "evaluate",
        "score a trained model per action (and on Go), or on a --benchmark file",
        add_evaluate_arguments,
        run_evaluate,
    ),
    Command(
        "ablate",
        "train the same model on variants of a corpus's data format and compare them on the same held-out cuts",
        add_ablate_arguments,
        run_ablate,
    ),
)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, unless the help names a default already or there is none to
    show (a required or unset option, a flag that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help = action.help or ""
        default = action.default
        if not action.option_strings or "default" in help.lower() or default in (None, "", argparse.SUPPRESS):
            return help
        if default is False or default == []:
            return help
        return f"{help} (default: %(default)s)".lstrip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracegen", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        subparser = commands.add_parser(command.name, help=command.help, formatter_class=DefaultsHelpFormatter)
        command.add_arguments(subparser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = next(command for command in COMMANDS if command.name == args.command)
    try:
        return command.run(args)
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
