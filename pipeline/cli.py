"""The `tracegen` command line: one subcommand per job, plus `inspect`."""

import argparse
import sys

from pipeline.config import JobConfig
from pipeline.job import JobIncomplete
from pipeline.sandbox import BACKENDS
from pipeline.stages.go_runs import GoSettings
from pipeline.stages.trace_functions import TraceSettings


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="dataset directory or URI (s3://..., gs://...)")
    parser.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all cores)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a dataset made with another config at --out")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracegen", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    functions = commands.add_parser("trace-functions", help="trace JSONL function records")
    functions.add_argument("--input", required=True, help="JSONL file of {id, code, input, entry?}")
    functions.add_argument("--sandbox", choices=BACKENDS, default="bwrap")
    functions.add_argument("--chunk-size", type=int, default=JobConfig.chunk_size)
    functions.add_argument("--max-events", type=int, default=TraceSettings.max_events)
    functions.add_argument("--max-seconds", type=float, default=TraceSettings.max_seconds)
    functions.add_argument("--record-timeout", type=float, default=TraceSettings.record_timeout_s)
    functions.add_argument("--per-trace", type=int, default=JobConfig.per_trace,
                           help="trajectories per trace and direction")
    _add_run_options(functions)

    repos = commands.add_parser("trace-repos", help="trace repositories' test suites (TOML manifest)")
    repos.add_argument("--manifest", required=True, help="TOML file of [[repo]] tables")
    repos.add_argument("--sandbox", choices=BACKENDS, default="bwrap")
    repos.add_argument("--max-events", type=int, default=TraceSettings.max_events, help="events per entry trace")
    repos.add_argument("--per-trace", type=int, default=JobConfig.per_trace,
                       help="trajectories per trace and direction")
    repos.add_argument("--cache-dir", default=None,
                       help="git mirrors and pip downloads (default $TRACEGEN_CACHE or ~/.cache/tracegen)")
    _add_run_options(repos)

    go = commands.add_parser("trace-go", help="run Go programs N times under runtime/trace")
    go.add_argument("--programs", required=True, help="directory whose subdirectories are Go programs")
    go.add_argument("--runs", type=int, default=GoSettings.runs, help="runs per program")
    go.add_argument("--timeout", type=float, default=GoSettings.timeout_s, help="seconds per run")
    go.add_argument("--gomaxprocs", default="", help="comma list of GOMAXPROCS values, cycled over runs")
    go.add_argument("--race", action="store_true", help="build with the race detector")
    go.add_argument("--max-events", type=int, default=GoSettings.max_events, help="event cap per run")
    go.add_argument("--sandbox", choices=BACKENDS, default="bwrap")
    _add_run_options(go)

    resample = commands.add_parser("trajectories", help="re-sample trajectories from stored traces")
    resample.add_argument("--traces", required=True, help="a dataset (the --out of a tracing job)")
    resample.add_argument("--per-trace", type=int, default=JobConfig.per_trace,
                          help="trajectories per trace and direction")
    _add_run_options(resample)

    inspect = commands.add_parser("inspect", help="summarise a dataset")
    inspect.add_argument("out", help="dataset directory or URI")
    inspect.add_argument("--examples", type=int, default=1, help="decoded examples to print")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "inspect":
            from pipeline.inspect import summarize
            print(summarize(args.out, examples=args.examples))
            return 0
        if args.command == "trace-functions":
            from pipeline.functions_job import trace_functions_job
            config = JobConfig(sandbox=args.sandbox, chunk_size=args.chunk_size, seed=args.seed,
                               per_trace=args.per_trace,
                               trace=TraceSettings(max_events=args.max_events, max_seconds=args.max_seconds,
                                                   record_timeout_s=args.record_timeout))
            trace_functions_job(args.input, args.out, config, workers=args.workers, address=args.ray_address,
                                overwrite=args.overwrite)
            from pipeline.inspect import summarize
            print(summarize(args.out))
            return 0
        if args.command == "trace-repos":
            from pipeline.repos_job import trace_repos_job
            config = JobConfig(sandbox=args.sandbox, seed=args.seed, per_trace=args.per_trace,
                               trace=TraceSettings(max_events=args.max_events))
            trace_repos_job(args.manifest, args.out, config, cache_dir=args.cache_dir, workers=args.workers,
                            address=args.ray_address, overwrite=args.overwrite)
            from pipeline.inspect import summarize
            print(summarize(args.out))
            return 0
        if args.command == "trace-go":
            from pipeline.go_job import trace_go_job
            settings = GoSettings(runs=args.runs, timeout_s=args.timeout, race=args.race,
                                  max_events=args.max_events,
                                  gomaxprocs=tuple(int(x) for x in args.gomaxprocs.split(",") if x.strip()))
            trace_go_job(args.programs, args.out, JobConfig(sandbox=args.sandbox, seed=args.seed),
                         settings=settings, workers=args.workers, address=args.ray_address,
                         overwrite=args.overwrite)
            from pipeline.inspect import summarize
            print(summarize(args.out))
            return 0
        if args.command == "trajectories":
            from pipeline.resample_job import resample_job
            resample_job(args.traces, args.out, seed=args.seed, per_trace=args.per_trace, workers=args.workers,
                         address=args.ray_address, overwrite=args.overwrite)
            from pipeline.inspect import summarize
            print(summarize(args.out))
            return 0
    except ValueError as error:
        print(f"tracegen: error: {error}", file=sys.stderr)
        return 2
    except JobIncomplete as error:
        print(f"tracegen: incomplete: {error}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
