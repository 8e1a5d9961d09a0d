"""Benchmark: a nightly refresh with nothing new and one with 1% new units, against a from-scratch run.

    .venv/bin/python bench/refresh.py [--units 100] [--chunk-size 4] [--sandbox bwrap] [--workers 2]

Sources: one functions file of `units × chunk-size` distinct small functions (written here). Side by side
in one process, on one embedded Ray started before any timing:
1. night 1: a refresh into an empty root (everything is new);
2. night 2: the same sources again (nothing new: plans, compares keys, publishes nothing);
3. night 3: 1% more units' worth of records appended (runs only those, publishes a version that lists
   the earlier shards by reference);
4. a from-scratch refresh of night 3's sources into a second, empty root: the reference.
Prints seconds and the ratio of each night to the reference. Reports are off (they are timed on their own
as the last line: `tracegen report` of night 3's version).
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.orchestrate import start_ray  # noqa: E402
from pipeline.kinds.functions import FunctionsConfig  # noqa: E402
from pipeline.refresh.plan import RefreshConfigs  # noqa: E402
from pipeline.refresh.sequence import refresh  # noqa: E402
from pipeline.version_report import write_report  # noqa: E402

SHAPES = (
    "def f(x):\n    total = {a}\n    for i in range(x % {b} + 3):\n        total += i * {c}\n    return total\n",
    "def f(x):\n    items = [x * {a} + k for k in range({b})]\n    items.sort(reverse=True)\n    return items[:{c}]\n",
    "def f(x):\n    n, steps = x + {a}, 0\n    while n > {b}:\n        n = n // 2 if n % 2 == 0 else n - {c}\n"
    "        steps += 1\n    return steps\n",
    "def f(x):\n    word = 'k' * ({a} % 7 + 1) + str(x)\n    counts = {{}}\n    for ch in word:\n"
    "        counts[ch] = counts.get(ch, 0) + {c}\n    return sorted(counts.items())[:{b}]\n",
)


def record_lines(start: int, count: int) -> str:
    """`count` distinct records; the numbers differ between records, so none is a near-duplicate."""
    lines = []
    for i in range(start, start + count):
        code = SHAPES[i % len(SHAPES)].format(a=i * 7 + 1, b=i % 11 + 2, c=i * 3 + 5)
        lines.append(json.dumps({"id": f"bench_{i}", "code": code, "input": str(i % 50)}) + "\n")
    return "".join(lines)


def timed(label: str, sources: Path, root: Path, configs: RefreshConfigs, workers: int):
    start = time.perf_counter()
    result = refresh(str(sources), str(root), configs, workers=workers, report=False)
    seconds = time.perf_counter() - start
    print(f"  {label}: {seconds:.2f} s — {result.summary()}", flush=True)
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    configs = RefreshConfigs(functions=FunctionsConfig(sandbox=args.sandbox, chunk_size=args.chunk_size))
    new_units = max(1, args.units // 100)
    start_ray(None, args.workers)
    with tempfile.TemporaryDirectory(prefix="tracegen-bench-refresh-") as tmp:
        work = Path(tmp)
        functions, sources = work / "functions.jsonl", work / "sources.toml"
        functions.write_text(record_lines(0, args.units * args.chunk_size))
        sources.write_text(f'[[functions]]\npath = "{functions}"\n')
        print(
            f"{args.units} units of {args.chunk_size} records, +{new_units} unit(s) on night 3; sandbox "
            f"{args.sandbox}, {args.workers} workers; CPython {platform.python_version()}, {os.cpu_count()} cores"
        )
        first, _ = timed("night 1 (empty root)", sources, work / "root", configs, args.workers)
        unchanged, quiet = timed("night 2 (nothing new)", sources, work / "root", configs, args.workers)
        assert quiet.version is None, "night 2 published a version"
        with functions.open("a") as handle:
            handle.write(record_lines(args.units * args.chunk_size, new_units * args.chunk_size))
        grown, night3 = timed(f"night 3 (+{new_units} new)", sources, work / "root", configs, args.workers)
        assert night3.units_run == new_units, f"night 3 ran {night3.units_run} units, expected {new_units}"
        scratch, _ = timed("from scratch (night 3's sources)", sources, work / "scratch", configs, args.workers)
        start = time.perf_counter()
        write_report(str(work / "root"))
        report = time.perf_counter() - start
        print(
            f"\nnothing new ÷ from scratch = {unchanged / scratch:.3f}; 1% new ÷ from scratch = {grown / scratch:.3f}; "
            f"night 1 ÷ from scratch = {first / scratch:.2f}; report of night 3's version {report:.2f} s"
        )


if __name__ == "__main__":
    main()
