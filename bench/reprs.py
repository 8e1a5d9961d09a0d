"""Benchmark: the structural renderer against calling the objects' own `__repr__`, and the parity run's cost.

    .venv/bin/python bench/reprs.py [--repeat 5] [--cases 20] [--backend bwrap]

1. Bundled examples: every good record of examples/functions.jsonl traced in-process (`trace_source`)
   with `mode="structural"` (the default: objects rendered from their state) and `mode="user"` (their own
   `__repr__`, what the tracer did before tracer version 2), interleaved, best of R rounds each.
2. A repository suite (bench/repos.py's `wordkit`, `--cases` parametrized cases per test function, plus
   a module of classes with their own `__repr__`): installed once, then per round the untraced run (the
   parity run), the traced run in structural mode and in user mode, in the same sandbox; the fastest of
   R is kept for each. Prints structural ÷ user for both workloads and untraced ÷ traced (what parity adds).
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import repo_fixtures  # noqa: E402
import repos as repos_bench  # noqa: E402

from pipeline.engine.stats import StageCounters  # noqa: E402
from pipeline.sandbox import make_sandbox  # noqa: E402
from pipeline.sources.git_cache import GitCache  # noqa: E402
from pipeline.sources.repo_manifest import RepoSpec  # noqa: E402
from pipeline.stages.repos.install import install_repo  # noqa: E402
from pipeline.stages.repos.suite_run import RepoTraceSettings, run_suite  # noqa: E402
from pipeline.stages.trace_functions import ReprLimits  # noqa: E402
from tracers.reprs.saferepr import Limits  # noqa: E402
from tracers.trace.backends import trace_source  # noqa: E402
from tracers.trace.tracer import Budgets  # noqa: E402

SHAPES = {
    "wordkit/shapes.py": """
        class Vector:
            def __init__(self, x, y):
                self.x, self.y = x, y

            def __repr__(self):
                return "Vector(%r, %r)" % (self.x, self.y)

            def add(self, other):
                return Vector(self.x + other.x, self.y + other.y)


        def path_length(points):
            total = Vector(0, 0)
            for point in points:
                total = total.add(point)
            return total
        """,
    "tests/test_shapes.py": """
        import pytest

        from wordkit.shapes import Vector, path_length


        @pytest.mark.parametrize("case", range(CASE_COUNT))
        def test_path(case):
            points = [Vector(i, case) for i in range(20)]
            assert path_length(points).x == sum(range(20))
        """,
}


def examples() -> list[dict]:
    with open(ROOT / "examples" / "functions.jsonl", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [record for record in records if not record["id"].startswith("bad_")]


def trace_examples(records: list[dict], mode: str) -> tuple[float, int]:
    start, events = time.perf_counter(), 0
    for record in records:
        result = trace_source(
            record["code"],
            record.get("entry") or "f",
            record["input"],
            budgets=Budgets(max_seconds=5.0),
            limits=Limits(mode=mode),
        )
        events += len(result["events"])
    return time.perf_counter() - start, events


def bench_examples(repeat: int) -> dict:
    records = examples()
    best = {"structural": float("inf"), "user": float("inf")}
    events = {}
    for _ in range(repeat):
        for mode in best:
            seconds, events[mode] = trace_examples(records, mode)
            best[mode] = min(best[mode], seconds)
    return {"records": len(records), "events": events, **best}


def bench_repo(repeat: int, cases: int, backend: str, pip_cache: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-reprs-"))
    try:
        files = dict(repos_bench.WORDKIT, **SHAPES)
        for name in ("tests/test_wordkit.py", "tests/test_shapes.py"):
            files[name] = files[name].replace("CASE_COUNT", str(cases))
        path = work / "wordkit"
        repo_fixtures.make_repo(path, files)
        spec = RepoSpec(name="wordkit", url=str(path), ref="main", timeout_s=600)
        sandbox = make_sandbox(backend)
        checkout = GitCache(str(work / "git")).checkout(spec.url, spec.ref)
        run_dir = tempfile.mkdtemp(prefix="bench-reprs-run-", dir=work)
        installed, failures = install_repo(spec, checkout.path, run_dir, sandbox, pip_cache, StageCounters("install"))
        if installed is None:
            raise SystemExit(f"install failed: {failures}")
        env_dir = installed.env_dir
        variants = {
            "untraced": (RepoTraceSettings(), True),
            "structural": (RepoTraceSettings(reprs=ReprLimits(mode="structural")), False),
            "user": (RepoTraceSettings(reprs=ReprLimits(mode="user")), False),
        }
        best = {name: float("inf") for name in variants}
        tests, events = {}, {}
        for _ in range(repeat):
            for name, (settings, untraced) in variants.items():
                counter = StageCounters(name)
                run = run_suite(spec, checkout.path, env_dir, run_dir, sandbox, settings, counter, untraced=untraced)
                best[name] = min(best[name], run.run_s)
                tests[name] = sum(test.outcome == "passed" for test in run.stream.tests)
                events[name] = counter.events
        return {"best": best, "tests": tests, "events": events}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--pip-cache", default=os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache"))
    args = parser.parse_args()
    ex = bench_examples(args.repeat)
    repo = bench_repo(max(1, args.repeat // 2 + 1), args.cases, args.backend, args.pip_cache)
    best = repo["best"]
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"best of {args.repeat} (examples) / {max(1, args.repeat // 2 + 1)} (repository)"
    )
    print("| workload | structural s | user-repr s | structural ÷ user | events (structural / user) |")
    print("|---|---|---|---|---|")
    print(
        f"| bundled examples ({ex['records']} records, in-process) | {ex['structural']:.3f} | {ex['user']:.3f} | "
        f"{ex['structural'] / ex['user']:.2f} | {ex['events']['structural']:,} / {ex['events']['user']:,} |"
    )
    print(
        f"| wordkit suite ({repo['tests']['structural']} tests passed, {args.backend}, traced run) | "
        f"{best['structural']:.2f} | {best['user']:.2f} | {best['structural'] / best['user']:.2f} | "
        f"{repo['events']['structural']:,} / {repo['events']['user']:,} |"
    )
    print(
        f"\nparity run (the same suite untraced, {repo['tests']['untraced']} tests passed): {best['untraced']:.2f} s "
        f"= {best['untraced'] / best['structural']:.2f} of the structural traced run "
        f"(a job with parity spends {1 + best['untraced'] / best['structural']:.2f}x the traced run's time)"
    )


if __name__ == "__main__":
    main()
