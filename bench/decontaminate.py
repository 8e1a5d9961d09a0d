"""Decontamination's cost: trace-functions' pre-trace stage with and without `--decontaminate`, one run.

    .venv/bin/python bench/decontaminate.py [--records 5000] [--items 1000] [--workers 2] [--repeat 3]

The benchmark file holds `--items` generated items (bench/small_functions.py, seed 1, each with an `output`).
The corpus holds `--records` records built from examples/functions.jsonl as bench/dedup.py builds its documents
(the examples, then renamed, padded and re-called copies): real small functions, none written from the
benchmark. Timed side by side, `--repeat` times each (best kept):
  * the pre-trace stage: `FunctionsKind.units` (read, dedup in Ray tasks, chunking) without decontamination,
    and with a `Decontaminator` of the benchmark file (the same plus matching every kept record in Ray tasks,
    the decontaminator shipped once); building the decontaminator (reading and signing the items, on the driver)
    is timed apart, as a job pays it once;
  * the matcher alone, in this process: `Decontaminator.match` over the corpus's records, one core.
Prints records/s for each, the ratio, and how many records the benchmark file dropped (a false-positive count:
nothing in the corpus copies it).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dedup import documents  # noqa: E402
from small_functions import small_functions  # noqa: E402

from pipeline.engine.orchestrate import start_ray  # noqa: E402
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind  # noqa: E402
from pipeline.stages.decontaminate import Decontaminator  # noqa: E402


def write_files(directory: Path, records: int, items: int) -> tuple[str, str]:
    """(the benchmark file, the corpus file)."""
    benchmark = directory / "benchmark.jsonl"
    with benchmark.open("w") as handle:
        for item in small_functions(items, seed=1):
            handle.write(json.dumps({**item, "id": f"item{item['id']}", "output": "0"}) + "\n")
    corpus = directory / "functions.jsonl"
    with corpus.open("w") as handle:
        for k, (code, entry, value) in enumerate(documents(records)):
            handle.write(json.dumps({"id": f"r{k}", "code": code, "input": value, "entry": entry}) + "\n")
    return str(benchmark), str(corpus)


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-decontaminate-") as scratch:
        benchmark, corpus = write_files(Path(scratch), args.records, args.items)
        start_ray(None, args.workers)
        kind = FunctionsKind()
        build_s, decontaminator = best_of(args.repeat, lambda: Decontaminator.from_files([benchmark]))
        assert isinstance(decontaminator, Decontaminator)
        plain, cleaned = FunctionsConfig(), FunctionsConfig(decontaminate=decontaminator)
        kind.units(corpus, plain)  # warm the Ray workers
        plain_s, _ = best_of(args.repeat, lambda: kind.units(corpus, plain))
        cleaned_s, units = best_of(args.repeat, lambda: kind.units(corpus, cleaned))
        dropped = len(units[0].payload.contaminated)  # type: ignore[index]
        counters = units[0].payload.counters  # type: ignore[index]
        kept = counters["dedup"].n_out
        records = [json.loads(line) for line in Path(corpus).read_text().splitlines()]
        match_s, _ = best_of(
            args.repeat, lambda: [decontaminator.match(r["code"], r["input"], r.get("output")) for r in records]
        )
    print(
        f"corpus: {args.records} records ({kept} after dedup), benchmark: {args.items} items; "
        f"{args.workers} Ray workers; python {sys.version.split()[0]}"
    )
    print(f"building the decontaminator (read + sign {args.items} items, driver): {build_s:.3f} s")
    print("| variant | seconds | records/s | time × without |")
    print("|---|---|---|---|")
    print(f"| pre-trace stage, no decontamination | {plain_s:.3f} | {args.records / plain_s:,.0f} | 1.00 |")
    print(
        f"| pre-trace stage, --decontaminate (1 file) | {cleaned_s:.3f} | {args.records / cleaned_s:,.0f} | "
        f"{cleaned_s / plain_s:.2f} |"
    )
    print(
        f"| matcher alone, one core, all {args.records} records | {match_s:.3f} | {args.records / match_s:,.0f} | - |"
    )
    print(f"records/s with / without decontamination: {plain_s / cleaned_s:.2f}")
    print(f"dropped as contaminated: {dropped} of {kept} (nothing in the corpus copies the benchmark)")


if __name__ == "__main__":
    main()
