"""Benchmark: trajectories/s per core from a stored traces table, against tracing the same events.

    .venv/bin/python bench/trajectories.py [--per-trace K] [--repeat R] [--record]

1. Traces every good record of examples/functions.jsonl in-process with `trace_source` (the tracer's
   own cost, without the sandbox around it), timing each call; writes the rows as a Parquet `traces`
   table with the real schema and reads it back (`to_pylist()`, locals as pairs) — the stored table.
2. Runs the trajectories stage over those rows on one core (K trajectories per trace per direction).
   Tracing and sampling are timed side by side in each of R rounds; the best round of each is kept.
3. Times the job's own trace stage on the same records once (`trace_functions` with the `process`
   sandbox: what a job pays per event, sandbox runner and trace-file parsing included).
4. Prints trajectories/s, events/s, and the ratio tracing time / sampling time for the same traces,
   against both: the issue asks for at least 10x, so sampling never becomes the bottleneck. `--record` appends the
   figures and the command to bench/RESULTS.md under `## Trajectories`.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.debugger import PolicyConfig  # noqa: E402
from pipeline.stages.trajectories import SamplingSettings, sample_trajectories_stage  # noqa: E402
from schemas import traces as traces_schema  # noqa: E402
from tracers.trace.backends import trace_source  # noqa: E402
from tracers.trace.tracer import Budgets  # noqa: E402


def trace_examples(max_events: int) -> tuple[list[dict], float]:
    """Trace rows of the example corpus and the seconds spent tracing them."""
    rows, seconds = [], 0.0
    with open(ROOT / "examples" / "functions.jsonl", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    for record in records:
        if record["id"].startswith("bad_"):
            continue
        start = time.perf_counter()
        result = trace_source(
            record["code"], record.get("entry", "f"), record["input"], budgets=Budgets(max_events=max_events)
        )
        seconds += time.perf_counter() - start
        events = [{**event, "locals": list(event["locals"].items())} for event in result["events"]]
        rows.append(
            {
                "trace_id": record["id"],
                "source_id": record["id"],
                "source_kind": "function",
                "repo_url": None,
                "commit": None,
                "path": None,
                "qualname": record.get("entry", "f"),
                "code": record["code"],
                "input": record["input"],
                "python_version": platform.python_version(),
                "tracer_version": "1",
                "exit": result["exit"],
                "truncated": result["truncated"],
                "truncation_reason": result["reason"],
                "n_events": len(events),
                "events": events,
            }
        )
    return rows, seconds


def pipeline_trace_seconds() -> tuple[float, int] | None:
    """Seconds the job's own trace stage takes on the same records (`process` sandbox: a sandboxed
    runner that forks per record and writes trace files the host parses), and its event count."""
    import warnings

    from pipeline.sandbox import make_sandbox
    from pipeline.sources.function_records import read_function_records
    from pipeline.stages.trace_functions import TraceSettings, trace_functions

    records, _ = read_function_records(str(ROOT / "examples" / "functions.jsonl"))
    records = [record for record in records if not record.id.startswith("bad_")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sandbox = make_sandbox("process")
    try:
        start = time.perf_counter()
        rows = trace_functions(records, sandbox, TraceSettings(), "bench").rows("traces")
        return time.perf_counter() - start, sum(row["n_events"] for row in rows)
    except Exception as error:  # no runnable sandbox here: report the in-process figure only
        print(f"(job trace stage not measured: {error})")
        return None


def stored(rows: list[dict]) -> list[dict]:
    """Write the rows as a Parquet traces table and read them back as the stage will get them."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "part-00000-0000.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema=traces_schema.SCHEMA), path, compression="zstd")
        return pq.read_table(path).to_pylist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-trace", type=int, default=2, help="trajectories per trace per direction")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each measurement (best is kept)")
    parser.add_argument("--max-events", type=int, default=10_000, help="tracer event budget per trace")
    parser.add_argument("--record", action="store_true", help="append the figures to bench/RESULTS.md")
    args = parser.parse_args()

    config = PolicyConfig()
    rows = stored(trace_examples(args.max_events)[0])
    n_events = sum(row["n_events"] for row in rows)
    ks = sorted({1, args.per_trace, 4})
    # Side by side: each round times tracing and then sampling at every K; the best round of each is
    # kept, so a noisy neighbour slows both alike instead of skewing the ratio.
    traced = float("inf")
    best = {k: float("inf") for k in ks}
    results = {}
    for _ in range(args.repeat):
        traced = min(traced, trace_examples(args.max_events)[1])
        for per_trace in ks:
            start = time.perf_counter()
            sampling = SamplingSettings(seed=0, per_trace=per_trace, policy=config)
            output = sample_trajectories_stage(rows, sampling, "bench")
            out, failures = output.rows("trajectories"), output.rows("failures")
            best[per_trace] = min(best[per_trace], time.perf_counter() - start)
            results[per_trace] = (best[per_trace], len(out), sum(row["n_tokens"] for row in out), len(failures))

    lines = [
        f"traces: {len(rows)} from examples/functions.jsonl, {n_events} events "
        f"(python {platform.python_version()}, {platform.machine()}, one core)",
        f"tracing them in-process (trace_source, best of {args.repeat}): {traced:.3f} s "
        f"= {n_events / traced:,.0f} events/s",
    ]
    staged = pipeline_trace_seconds()
    if staged is not None:
        lines.append(
            f"the job's trace stage on the same records (process sandbox, fork per record): "
            f"{staged[0]:.3f} s for {staged[1]} events = {staged[1] / staged[0]:,.0f} events/s"
        )
    for per_trace, (seconds, count, tokens, failures) in results.items():
        lines.append(
            f"K={per_trace} per direction: {count} trajectories in {seconds:.3f} s = "
            f"{count / seconds:,.0f} trajectories/s/core, {n_events / seconds:,.0f} trace events/s, "
            f"{tokens / seconds / 1e6:.1f} M byte-tokens/s; tracing/sampling = "
            f"{traced / seconds:.1f}x in-process"
            + (f", {staged[0] / seconds:.0f}x the job's trace stage" if staged else "")
            + f" ({failures} failures)"
        )
    print("\n".join(lines))
    if args.record:
        command = "  ".join(["$", ".venv/bin/python", "bench/trajectories.py", *sys.argv[1:]])
        results_file = ROOT / "bench" / "RESULTS.md"
        existing = results_file.read_text() if results_file.exists() else "# Benchmark results\n"
        block = ([] if "\n## Trajectories\n" in "\n" + existing else ["", "## Trajectories", ""]) + [
            f"{time.strftime('%Y-%m-%d')}, `{command.replace('  ', ' ')}`:",
            "",
            "```",
            *lines,
            "```",
            "",
        ]
        with open(results_file, "a", encoding="utf-8") as handle:
            handle.write("\n".join(block) + "\n")


if __name__ == "__main__":
    main()
