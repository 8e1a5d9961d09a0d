"""Benchmark: one repository traced per sandbox backend — wall time per stage, and events/s against the
untraced test run.

    .venv/bin/python bench/repos.py [--backends bwrap docker] [--cases 40] [--repeat 3] [--record]

Builds a pure-Python fixture repository (`wordkit`: text utilities, sorting and number algorithms, a
small matrix class; a parametrized pytest suite) as a real git repo, then for each backend:
1. clone (into a fresh git cache), install (pip, with a shared download cache, warmed once first),
2. runs the suite in the trace sandbox *without* the tracer (same runner, guards and binds: the
   untraced baseline), then with it, side by side on the same venv,
3. cuts the traces (strict parse, one row per entry, dedup) and writes them as Parquet shards.
Prints the seconds of clone / install / trace / cut / write, the events the tracer recorded, events/s
of the traced run, the tracer's µs per event over the untraced run, and traced ÷ untraced wall time.
With --repeat R each backend runs R times (interleaved) and the run with the fastest traced run is
shown: the machine is shared and noisy. `--record` appends the table to bench/RESULTS.md
under `## Repositories`.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import repo_fixtures  # noqa: E402
from workload import TEXT_FUNCTIONS  # noqa: E402

from pipeline.engine.executor import UnitSink  # noqa: E402
from pipeline.engine.failures import Failures  # noqa: E402
from pipeline.engine.stats import StageCounters  # noqa: E402
from pipeline.sandbox import make_sandbox  # noqa: E402
from pipeline.sources.git_cache import GitCache  # noqa: E402
from pipeline.sources.repo_manifest import RepoSpec  # noqa: E402
from pipeline.stages.repos.cut import EntryCutter  # noqa: E402
from pipeline.stages.repos.install import install_repo  # noqa: E402
from pipeline.stages.repos.run_failures import report_run  # noqa: E402
from pipeline.stages.repos.suite_run import RepoTraceSettings, run_suite  # noqa: E402
from pipeline.stages.repos.trace import repo_input  # noqa: E402

WORDKIT = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "wordkit"
        version = "0.1.0"
        """,
    "wordkit/__init__.py": "",
    "wordkit/text.py": TEXT_FUNCTIONS
    + textwrap.dedent(
        """

        def top_k(counts, k):
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
            return ranked[:k]


        def ngrams(tokens, n):
            return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
        """
    ),
    "wordkit/algos.py": """
        def merge(left, right):
            out, i, j = [], 0, 0
            while i < len(left) and j < len(right):
                if left[i] <= right[j]:
                    out.append(left[i])
                    i += 1
                else:
                    out.append(right[j])
                    j += 1
            return out + left[i:] + right[j:]


        def merge_sort(values):
            if len(values) <= 1:
                return list(values)
            middle = len(values) // 2
            return merge(merge_sort(values[:middle]), merge_sort(values[middle:]))


        def gcd(a, b):
            while b:
                a, b = b, a % b
            return a


        def primes_up_to(n):
            sieve = [True] * (n + 1)
            primes = []
            for candidate in range(2, n + 1):
                if sieve[candidate]:
                    primes.append(candidate)
                    for multiple in range(candidate * candidate, n + 1, candidate):
                        sieve[multiple] = False
            return primes


        def collatz_length(n):
            steps = 0
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                steps += 1
            return steps
        """,
    "wordkit/matrix.py": """
        class Matrix:
            def __init__(self, rows):
                self.rows = [list(row) for row in rows]

            def transpose(self):
                return Matrix(zip(*self.rows))

            def mul(self, other):
                columns = other.transpose().rows
                return Matrix([[sum(a * b for a, b in zip(row, column)) for column in columns]
                               for row in self.rows])

            @staticmethod
            def identity(n):
                return Matrix([[1 if i == j else 0 for j in range(n)] for i in range(n)])
        """,
    "tests/test_wordkit.py": """
        import pytest

        from wordkit.algos import collatz_length, gcd, merge_sort, primes_up_to
        from wordkit.matrix import Matrix
        from wordkit.text import frequencies, ngrams, tokenize, top_k

        CASES = list(range(CASE_COUNT))
        TEXT = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs! " * 3


        @pytest.mark.parametrize("case", CASES)
        def test_text(case):
            tokens = tokenize(TEXT[case:] + " extra words " * (case % 5))
            counts = frequencies(tokens)
            assert top_k(counts, 3)[0][1] >= 1
            assert len(ngrams(tokens, 2)) == max(0, len(tokens) - 1)


        @pytest.mark.parametrize("case", CASES)
        def test_sorting(case):
            values = [(case * 7919 + i * 104729) % 1000 for i in range(30 + case)]
            assert merge_sort(values) == sorted(values)


        @pytest.mark.parametrize("case", CASES)
        def test_numbers(case):
            assert gcd(case * 12 + 6, 18) in (6, 18)
            assert primes_up_to(50 + case)[:3] == [2, 3, 5]
            assert collatz_length(case + 1) >= 0


        @pytest.mark.parametrize("case", CASES)
        def test_matrix(case):
            m = Matrix([[case, 1, 2], [3, 4, 5], [6, 7, 8]])
            assert m.mul(Matrix.identity(3)).rows == m.rows
        """,
}


def build_repo(root: Path, cases: int) -> Path:
    files = dict(WORDKIT)
    files["tests/test_wordkit.py"] = files["tests/test_wordkit.py"].replace("CASE_COUNT", str(cases))
    path = root / "wordkit"
    repo_fixtures.make_repo(path, files)
    return path


def write_seconds(tables: dict[str, list[dict]], out: str) -> float:
    start = time.perf_counter()
    sink = UnitSink(out, 0, 3)
    for name, rows in tables.items():
        sink.write(name, rows)
    sink.close()
    return time.perf_counter() - start


def bench_backend(backend: str, spec: RepoSpec, work: Path, pip_cache: str, settings: RepoTraceSettings) -> dict:
    """clone, install, untraced run, traced run, cut, write — timed one after the other on one venv."""
    sandbox = make_sandbox(backend)
    failures = Failures("bench")
    counters = {name: StageCounters(name) for name in ("clone", "install", "untraced", "trace", "cut")}
    with counters["clone"].timed():
        checkout = GitCache(str(work / f"git-{backend}")).checkout(spec.url, spec.ref)
    run_dir = tempfile.mkdtemp(prefix=f"bench-{backend}-")
    try:
        repo = repo_input(spec, checkout.commit)
        installed, found = install_repo(spec, checkout.path, run_dir, sandbox, pip_cache, counters["install"])
        failures.extend(repo, found)
        if installed is None:
            raise SystemExit(f"{backend}: install failed: {failures.rows}")
        env_dir = installed.env_dir
        baseline = run_suite(
            spec, checkout.path, env_dir, run_dir, sandbox, settings, counters["untraced"], untraced=True
        )
        cutter = EntryCutter(spec, checkout, settings, counters["cut"])
        run = run_suite(spec, checkout.path, env_dir, run_dir, sandbox, settings, counters["trace"], on_test=cutter)
        failures.extend(repo, report_run(run.stream, run.log_tail, run.outcome, spec))
        traces, dropped = cutter.finish()
        failures.extend(repo, dropped)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    write_s = write_seconds({"traces": traces, "failures": failures.rows}, str(work / f"out-{backend}"))
    return {
        "backend": backend,
        "clone": counters["clone"].seconds,
        "install": counters["install"].seconds,
        "untraced": baseline.run_s,
        "trace": run.run_s,
        "cut": counters["cut"].seconds + counters["trace"].seconds - run.run_s,  # parse + cut
        "write": write_s,
        "tests": len(run.stream.tests),
        "untraced_tests": len(baseline.stream.tests),
        "events": counters["trace"].events,
        "rows": len(traces),
        "row_events": sum(row["n_events"] for row in traces),
        "failures": [f"{row['error_type']}: {row['message'][:120]}" for row in failures.rows],
    }


def table(results: list[dict]) -> str:
    lines = [
        "| backend | clone s | install s | untraced run s | traced run s | cut s | write s | tests | "
        "events recorded | events/s (traced run) | µs/event over untraced | traced ÷ untraced | rows (events) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['backend']} | {r['clone']:.2f} | {r['install']:.2f} | {r['untraced']:.2f} | "
            f"{r['trace']:.2f} | {r['cut']:.2f} | {r['write']:.2f} | {r['tests']} | {r['events']:,} | "
            f"{r['events'] / r['trace']:,.0f} | {(r['trace'] - r['untraced']) / r['events'] * 1e6:.1f} | "
            f"{r['trace'] / r['untraced']:.2f} | "
            f"{r['rows']:,} ({r['row_events']:,}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["bwrap", "docker"])
    parser.add_argument("--cases", type=int, default=40, help="parametrized cases per test function")
    parser.add_argument("--repeat", type=int, default=1, help="runs per backend; the fastest traced run is kept")
    parser.add_argument("--pip-cache", default=os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache"))
    parser.add_argument("--record", action="store_true", help="append the results to bench/RESULTS.md")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-repos-"))
    try:
        path = build_repo(work, args.cases)
        spec = RepoSpec(name="wordkit", url=str(path), ref="main", timeout_s=600)
        settings = RepoTraceSettings()
        bench_backend(args.backends[0], spec, work / "warm", args.pip_cache, settings)  # warm pip's cache
        runs = {backend: [] for backend in args.backends}
        for round_ in range(args.repeat):
            for backend in args.backends:
                runs[backend].append(bench_backend(backend, spec, work / f"round{round_}", args.pip_cache, settings))
        results = [min(runs[backend], key=lambda r: r["trace"]) for backend in args.backends]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = table(results)
    print(text)
    for r in results:
        if r["failures"] or r["untraced_tests"] != r["tests"]:
            print(f"{r['backend']}: {r['untraced_tests']} untraced tests, failures: {r['failures']}")
    if args.record:
        command = (
            f"$ .venv/bin/python bench/repos.py --backends {' '.join(args.backends)} --cases {args.cases} "
            f"--repeat {args.repeat} --record"
        )
        note = (
            f"{time.strftime('%Y-%m-%d')}, `{command}` (CPython {platform.python_version()}, "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end):"
        )
        with open(ROOT / "bench" / "RESULTS.md", "a", encoding="utf-8") as handle:
            handle.write(f"\n## Repositories\n\n{note}\n\n{text}\n")


if __name__ == "__main__":
    main()
