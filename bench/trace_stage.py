"""Issue 13 item 1: what the trace stage costs per record, for two trees side by side in one run.

    .venv/bin/python bench/trace_stage.py [--records 800] [--job-records 10000] BASE_TREE [TREE ...]

For each tree (this checkout, or an older commit exported with `git archive`), on the generated corpus of
small functions (bench/small_functions.py, ~14 events each):

- `in-process`: tracers.trace.backends.trace_source on every record, one core (the cheapest tracing there is);
- `stage bwrap`: pipeline.stages.trace_functions over the corpus in chunks of 16 (a job's units), one
  worker: wall ms per record;
- `stage cpu`: the same with the process backend, whose sandboxed processes are this process's waited
  descendants, so their CPU time is counted: CPU ms per record, host and sandbox together (per core);
- `job`: `tracegen trace-functions --workers 2` on `--job-records` records, end to end (Ray, tracing,
  trajectories, Parquet): recorded events/s against the in-process tracer's events/s.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

BENCH = os.path.dirname(os.path.abspath(__file__))
CHUNK = 16


def corpus(n):
    sys.path.insert(0, BENCH)
    from small_functions import small_functions

    return small_functions(n)


def measure(tree, n):
    """One tree's figures, in this process (its packages first on sys.path)."""
    sys.path.insert(0, tree)
    from pipeline.sandbox import make_sandbox
    from pipeline.sources.function_records import FunctionRecord
    from pipeline.stages.trace_functions import TraceSettings, trace_functions
    from tracers.trace.backends import trace_source

    records = [FunctionRecord(r["id"], r["code"], r["input"], r["entry"], r["id"]) for r in corpus(n)]
    start = time.perf_counter()
    events = sum(len(trace_source(r.code, r.entry, r.input)["events"]) for r in records)
    in_process = time.perf_counter() - start

    def stage(sandbox):
        traced = 0
        for first in range(0, len(records), CHUNK):
            traced += (
                trace_functions(records[first : first + CHUNK], sandbox, TraceSettings(), "bench")
                .counters["trace"]
                .events
            )
        return traced

    bwrap = make_sandbox("bwrap")
    stage(bwrap)  # warm: the page cache, and a warm runner where the tree keeps one
    start = time.perf_counter()
    stage_events = stage(bwrap)
    wall = time.perf_counter() - start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        process = make_sandbox("process")
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    stage(process)
    try:
        from pipeline.stages.runner_session import close_warm_sessions

        close_warm_sessions()  # its runner's CPU is counted once it has been waited for
    except ImportError:
        pass
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before, strict=True))
    return {
        "records": n,
        "events": events,
        "stage_events": stage_events,
        "in_process_ms": in_process / n * 1e3,
        "stage_wall_ms": wall / n * 1e3,
        "stage_cpu_ms": cpu / n * 1e3,
    }


def job(tree, n):
    """Events/s of a whole trace-functions job on `n` records, 2 workers, bwrap."""
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "records.jsonl")
        with open(path, "w") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in corpus(n))
        out = os.path.join(work, "out")
        env = dict(os.environ, PYTHONPATH=tree)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "trace-functions", "--input", path, "--out", out, "--workers", "2"],
            cwd=tree,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        code = (
            "import polars as pl, sys; "
            "print(pl.scan_parquet(sys.argv[1] + '/traces/**/*.parquet')"
            ".select(pl.col('n_events').sum()).collect().item())"
        )
        counted = subprocess.run([sys.executable, "-c", code, out], capture_output=True, text=True, check=True)
        events = int(counted.stdout)
    return {"job_records": n, "job_events": events, "job_wall_s": wall, "job_events_per_s": events / wall}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--records", type=int, default=800)
    parser.add_argument("--job-records", type=int, default=10_000)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(measure(args.trees[0], args.records)))
        return
    print(f"corpus: {args.records} small functions (bench/small_functions.py); python {sys.version.split()[0]}")
    for tree in args.trees:
        inner = [sys.executable, __file__, "--inner", "--records", str(args.records), tree]
        figures = json.loads(subprocess.run(inner, capture_output=True, text=True, check=True).stdout)
        if args.job_records:
            figures.update(job(tree, args.job_records))
        in_process_events_per_s = figures["events"] / (figures["in_process_ms"] * figures["records"] / 1e3)
        print(
            f"{tree}: {figures['events'] / figures['records']:.1f} events/record; in-process "
            f"{figures['in_process_ms']:.3f} ms/record ({in_process_events_per_s:,.0f} events/s); "
            f"stage (bwrap, 1 worker) {figures['stage_wall_ms']:.2f} ms/record wall; "
            f"stage CPU (process backend, host + sandbox) "
            f"{figures['stage_cpu_ms']:.2f} ms/record"
        )
        if args.job_records:
            print(
                f"    job, {figures['job_records']} records, 2 workers: {figures['job_wall_s']:.1f} s, "
                f"{figures['job_events_per_s']:,.0f} events/s = "
                f"{figures['job_events_per_s'] / in_process_events_per_s:.1%} of the in-process tracer"
            )


if __name__ == "__main__":
    main()
