"""Benchmark: trajectories/s per core from a stored traces table, against tracing the same events.

    .venv/bin/python bench/trajectories.py [--per-trace K] [--repeat R] [--record]

1. Traces every good record of examples/functions.jsonl in-process with `trace_source` (the tracer's
   own cost, without the sandbox around it), timing each call; writes the rows as a Parquet `traces`
   table with the real schema and reads it back (`to_pylist()`, locals as pairs) — the stored table.
2. Runs the trajectories stage over those rows on one core (K trajectories per trace per direction),
   best of R runs.
3. Prints trajectories/s, events/s, and the ratio tracing time / sampling time for the same traces:
   DESIGN asks for at least 10x, so sampling never becomes the bottleneck. `--record` appends the
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
from pipeline.stages.trajectories import sample_trajectories_stage  # noqa: E402
from schemas import traces as traces_schema  # noqa: E402
from tracers.pytrace import Budgets, trace_source  # noqa: E402


def trace_examples(max_events: int) -> tuple[list[dict], float]:
    """Trace rows of the example corpus and the seconds spent tracing them."""
    rows, seconds = [], 0.0
    with open(ROOT / "examples" / "functions.jsonl", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    for record in records:
        if record["id"].startswith("bad_"):
            continue
        start = time.perf_counter()
        result = trace_source(record["code"], record.get("entry", "f"), record["input"],
                              budgets=Budgets(max_events=max_events))
        seconds += time.perf_counter() - start
        events = [{**event, "locals": list(event["locals"].items())} for event in result["events"]]
        rows.append({"trace_id": record["id"], "source_id": record["id"], "source_kind": "function",
                     "repo_url": None, "commit": None, "path": None, "qualname": record.get("entry", "f"),
                     "code": record["code"], "input": record["input"], "python_version": platform.python_version(),
                     "tracer_version": "1", "exit": result["exit"], "truncated": result["truncated"],
                     "truncation_reason": result["reason"], "n_events": len(events), "events": events})
    return rows, seconds


def stored(rows: list[dict]) -> list[dict]:
    """Write the rows as a Parquet traces table and read them back as the stage will get them."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "part-00000-0000.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema=traces_schema.SCHEMA), path, compression="zstd")
        return pq.read_table(path).to_pylist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-trace", type=int, default=2, help="trajectories per trace per direction")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (best is kept)")
    parser.add_argument("--max-events", type=int, default=10_000, help="tracer event budget per trace")
    parser.add_argument("--record", action="store_true", help="append the figures to bench/RESULTS.md")
    args = parser.parse_args()

    trace_seconds = []
    for _ in range(args.repeat):
        rows, seconds = trace_examples(args.max_events)
        trace_seconds.append(seconds)
    traced = min(trace_seconds)
    rows = stored(rows)
    n_events = sum(row["n_events"] for row in rows)
    config = PolicyConfig()
    results = {}
    for per_trace in sorted({1, args.per_trace, 4}):
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            out, failures, _ = sample_trajectories_stage(rows, config, 0, per_trace, "bench")
            best = min(best, time.perf_counter() - start)
        tokens = sum(row["n_tokens"] for row in out)
        results[per_trace] = (best, len(out), tokens, len(failures))

    lines = [f"traces: {len(rows)} from examples/functions.jsonl, {n_events} events "
             f"(python {platform.python_version()}, {platform.machine()}, one core)",
             f"tracing them in-process (trace_source, best of {args.repeat}): {traced:.3f} s "
             f"= {n_events / traced:,.0f} events/s"]
    for per_trace, (seconds, count, tokens, failures) in results.items():
        lines.append(f"K={per_trace} per direction: {count} trajectories in {seconds:.3f} s = "
                     f"{count / seconds:,.0f} trajectories/s/core, {n_events / seconds:,.0f} trace events/s, "
                     f"{tokens / seconds / 1e6:.1f} M byte-tokens/s; tracing/sampling = "
                     f"{traced / seconds:.1f}x ({failures} failures)")
    print("\n".join(lines))
    if args.record:
        command = "  ".join(["$", ".venv/bin/python", "bench/trajectories.py", *sys.argv[1:]])
        results_file = ROOT / "bench" / "RESULTS.md"
        existing = results_file.read_text() if results_file.exists() else "# Benchmark results\n"
        block = ([] if "\n## Trajectories\n" in "\n" + existing else ["", "## Trajectories", ""]) + [
            f"{time.strftime('%Y-%m-%d')}, `{command.replace('  ', ' ')}`:", "", "```", *lines, "```", ""]
        with open(results_file, "a", encoding="utf-8") as handle:
            handle.write("\n".join(block) + "\n")


if __name__ == "__main__":
    main()
