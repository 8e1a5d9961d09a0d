"""Benchmark: data-format ablations on real code — which trajectories/pack defaults train the better model.

    .venv/bin/python bench/ablate.py [--scratch DIR] [--packages PIN ...] [--traces DATASET]
                                     [--variant NAME=OPTIONS ...] [-- more tracegen ablate options]

1. The corpus, made at bench time and never committed: the sdists of real pure-Python packages that ship their
   tests (PACKAGES: picked from bench/wild.py's list, suites that trace in about a minute each), traced by
   `tracegen trace-repos` with its defaults (bwrap, `timeout_s = 300`) from a manifest of `sdist = "name==version"`
   repositories, into DIR/traces (a second run reuses it: the job skips finished units); --traces names a traced
   corpus instead (bench/pretrain_gpu.sh: the one traced here, on a GPU machine that runs no corpus code).
2. `tracegen ablate --traces DIR/traces --out DIR/ablation` with VARIANTS (or --variant's), the --size cpu preset
   and whatever follows `--` (`--size gpu`, `--tokens N`, ...): the same held-out sources, model, seed and token
   budget for each variant.
3. Prints the corpus's size, the table (DIR/ablation/ablation.md, the plot beside it) and each step's wall time.

Everything stays under --scratch (default /tmp/tracegen-bench-ablate); bench/RESULTS.md takes the table by hand.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.reader import table_rows  # noqa: E402

PACKAGES = (
    "toolz==1.2.0",
    "inflection==0.5.1",
    "tabulate==0.10.0",
    "isodate==0.7.2",
    "xmltodict==1.0.4",
    "python-slugify==9.2.0",
    "semver==3.1.2",
    "parse==1.22.4",
    "glom==25.12.0",
    "cachetools==8.0.2",
)
VARIANTS = (
    "full_locals=--full-locals",
    "loss_all=--loss all",
    "per_trace_8=--per-trace 8",
    "bytes=--tokenizer bytes",
)


def tracegen(*args: str) -> float:
    """Run `python -m pipeline.cli ARGS` from this checkout; its wall seconds (a failure stops the bench)."""
    start = time.perf_counter()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start


def manifest(path: Path, pins: list[str]) -> None:
    tables = [f'[[repo]]\nname = "{pin.split("==")[0]}"\nsdist = "{pin}"\ntimeout_s = 300\n' for pin in pins]
    path.write_text("\n".join(tables))


def corpus_size(traces: str) -> str:
    sources = Counter(row["source_id"] for row in table_rows(traces, "traces", ["source_id"]))
    return f"{sum(sources.values()):,} traces of {len(sources):,} functions"


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/tracegen-bench-ablate"))
    parser.add_argument("--packages", nargs="+", default=list(PACKAGES))
    parser.add_argument("--traces", default=None, help="a traced corpus to use instead of tracing --packages")
    parser.add_argument("--variant", action="append", default=None)
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    traces, traced = args.traces, 0.0
    if traces is None:
        manifest(args.scratch / "repos.toml", args.packages)
        traces = str(args.scratch / "traces")
        traced = tracegen("trace-repos", "--manifest", str(args.scratch / "repos.toml"), "--out", traces)
    variants = [option for spec in (args.variant or VARIANTS) for option in ("--variant", spec)]
    ablation = str(args.scratch / "ablation")
    ablated = tracegen("ablate", "--traces", traces, "--out", ablation, *variants, *extra)
    with open(os.path.join(ablation, "ablation.json")) as handle:
        settings = json.load(handle)["settings"]
    print(f"\ncorpus {traces}: {corpus_size(traces)}; trace-repos {traced:.0f} s")
    print(f"ablate: {ablated:.0f} s, {os.cpu_count()} cores; settings {json.dumps(settings, sort_keys=True)}")
    print(open(os.path.join(ablation, "ablation.md")).read())


if __name__ == "__main__":
    main()
