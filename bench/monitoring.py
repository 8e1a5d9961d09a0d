"""Benchmark (issue 13, item 4): the sys.monitoring tracer backend against settrace, side by side in one run.

    .venv/bin/python bench/monitoring.py [--python 3.12] [--cases 100] [--repeat 3] [--record]

1. In process, under `--python` (pyenv's 3.12 by default; this part is standard library only and runs in a
   child interpreter): a CPU-bound workload traced whole by the function tracer, and a "suite" of repository
   calls under the entry tracer after the per-function budgets are spent (every call past its budget);
   untraced, settrace, sys.monitoring, best of `--repeat`; traced ÷ untraced.
2. A repository's pytest suite in the bwrap sandbox (bench/repos.py's `wordkit`, `--cases` parametrized cases
   per test function), its venv made from `--python`: untraced, traced with settrace, traced with
   sys.monitoring, each with the default budgets (200 entries per function over the run, 20 per test) and
   with the per-function budget spent at its first call (`max_entries_per_function=1`: the suite is then code
   past its budget); plus the host's own interpreter with settrace, today's configuration. Fastest of
   `--repeat` interleaved runs each; traced ÷ untraced of the whole pytest run, startup included.
`--record` appends the tables to bench/RESULTS.md under `## sys.monitoring backend`.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from workload import TEXT_FUNCTIONS, WORKLOAD, best_of

ROOT = Path(__file__).resolve().parents[1]

REPO_MODULE = (
    TEXT_FUNCTIONS
    + """

def gcd(a, b):
    while b:
        a, b = b, a % b
    return a

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
"""
)


# -- part 1: in process, standard library only (runs under --python) ------------------------------------------
def in_process(repeat, rounds, tests):
    """{what: {variant: seconds}} for the function tracer's workload and the entry tracer past its budgets."""
    import importlib.util
    import io

    sys.path.insert(0, str(ROOT))
    from tracers.suite.entry_monitoring import MonitoringEntryTracer
    from tracers.suite.entry_tracer import EntryTracer
    from tracers.suite.pytest_plugin import Sink
    from tracers.suite.repo_code import PathFilter
    from tracers.trace.monitoring import MonitoringTracer
    from tracers.trace.tracer import Budgets, Tracer

    namespace = {}
    exec(compile(WORKLOAD, "<bench>", "exec"), namespace)
    entry, lines = namespace["f"], WORKLOAD.splitlines()
    events = {}

    def function_run(cls):
        def run():
            tracer = cls(
                lambda c: c.co_filename == "<bench>",
                lambda c, n: lines[n - 1],
                io.StringIO().write,
                budgets=Budgets(max_events=10**9, max_bytes=1 << 40, max_seconds=600),
            )
            outcome = tracer.run(entry, (rounds,))
            assert outcome.exit == "normal", outcome.as_dict()
            events[cls.backend] = outcome.n_events

        return run

    workload = {
        "untraced": best_of(repeat * 20, lambda: entry(rounds)),
        "settrace": best_of(repeat, function_run(Tracer)),
        "monitoring": best_of(repeat, function_run(MonitoringTracer)),
    }
    assert events["settrace"] == events["monitoring"]

    work = tempfile.mkdtemp(prefix="bench-monitoring-")
    try:
        with open(os.path.join(work, "repo_module.py"), "w") as handle:
            handle.write(REPO_MODULE)

        def suite(cls):
            spec = importlib.util.spec_from_file_location("repo_module", os.path.join(work, "repo_module.py"))
            module = importlib.util.module_from_spec(spec)
            tracer = cls(Sink(io.StringIO(), 1 << 40), PathFilter([work], ["**/*.py"], []), {}) if cls else None
            spec.loader.exec_module(module)
            text = "The quick brown fox jumps over the lazy dog. " * 4

            def one_test():
                if tracer:
                    tracer.start()
                for i in range(20):
                    module.tokenize(text)
                    module.gcd(i * 12 + 6, 18)
                    module.fib(8)
                if tracer:
                    tracer.stop()

            for _ in range(60):  # spends every function's budget (200 entries over the run, 20 per test)
                one_test()
            seconds = best_of(repeat, lambda: [one_test() for _ in range(tests)])
            if tracer:
                tracer.close()
            return seconds

        variants = {"untraced": None, "settrace": EntryTracer, "monitoring": MonitoringEntryTracer}
        past_budget = {name: float("inf") for name in variants}
        for _ in range(repeat):  # interleaved: a busy machine slows one round, not one variant
            for name, cls in variants.items():
                past_budget[name] = min(past_budget[name], suite(cls))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "python": platform.python_version(),
        "function tracer, whole workload (%d events)" % events["monitoring"]: workload,
        "entry tracer, %d tests past every budget" % tests: past_budget,
    }


# -- part 2: a pytest suite in the sandbox --------------------------------------------------------------------
def suite_runs(python, cases, repeat, pip_cache, only=("host", "settrace", "monitoring")):
    """[{configuration, budgets, untraced_s, traced_s, tests, events}], fastest traced run of each."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    import repos as repo_bench

    from pipeline.engine.stats import StageCounters
    from pipeline.sandbox import make_sandbox
    from pipeline.sandbox.interpreters import describe
    from pipeline.sources.git_cache import GitCache
    from pipeline.sources.repo_manifest import RepoSpec
    from pipeline.stages.repos.install import install_repo
    from pipeline.stages.repos.suite_run import RepoTraceSettings, run_suite

    work = Path(tempfile.mkdtemp(prefix="bench-monitoring-repo-"))
    results = []
    try:
        path = repo_bench.build_repo(work, cases)
        version = ".".join(map(str, describe(python).version))
        configurations = [(f"{platform.python_version()} (host), settrace", None, "settrace")] if "host" in only else []
        configurations += [
            (f"{version}, {backend}", python, backend) for backend in ("settrace", "monitoring") if backend in only
        ]
        for name, interpreter, backend in configurations:
            sandbox = make_sandbox("bwrap", python=interpreter)
            spec = RepoSpec(name="wordkit", url=str(path), ref="main", timeout_s=900)
            checkout = GitCache(str(work / "git")).checkout(spec.url, spec.ref)
            run_dir = tempfile.mkdtemp(prefix="bench-monitoring-run-")
            try:
                installed, failures = install_repo(
                    spec, checkout.path, run_dir, sandbox, pip_cache, StageCounters("install")
                )
                if installed is None:
                    raise SystemExit(f"{name}: install failed: {failures}")
                env_dir = installed.env_dir
                for budgets in ("default", "spent"):
                    run_spec = spec if budgets == "default" else replace(spec, max_entries_per_function=1)
                    settings = RepoTraceSettings(tracer_backend=backend, parity=False)
                    best = None
                    for _ in range(repeat):
                        untraced = run_suite(
                            run_spec,
                            checkout.path,
                            env_dir,
                            run_dir,
                            sandbox,
                            settings,
                            StageCounters("u"),
                            untraced=True,
                        )
                        counter = StageCounters("trace")
                        traced = run_suite(run_spec, checkout.path, env_dir, run_dir, sandbox, settings, counter)
                        if best is None or traced.run_s < best["traced_s"]:
                            best = {
                                "configuration": name,
                                "budgets": budgets,
                                "untraced_s": untraced.run_s,
                                "traced_s": traced.run_s,
                                "tests": len(traced.stream.tests),
                                "untraced_tests": len(untraced.stream.tests),
                                "events": counter.events,
                                "backend": (traced.stream.header or {}).get("tracer_backend", "settrace"),
                                "violations": [v["kind"] for v in traced.stream.violations],
                            }
                    results.append(best)
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def tables(inprocess, suites, cases):
    lines = [
        f"In process, CPython {inprocess['python']} (best of the repeats):",
        "",
        "| what | untraced s | settrace s | sys.monitoring s | settrace ÷ untraced | sys.monitoring ÷ untraced |",
        "|---|---|---|---|---|---|",
    ]
    for what, times in inprocess.items():
        if what == "python":
            continue
        lines.append(
            f"| {what} | {times['untraced']:.4f} | {times['settrace']:.4f} | {times['monitoring']:.4f} | "
            f"{times['settrace'] / times['untraced']:.2f} | {times['monitoring'] / times['untraced']:.2f} |"
        )
    lines += [
        "",
        f"A pytest suite in the bwrap sandbox (`wordkit`, {cases} cases per test function; the whole pytest run):",
        "",
        "| interpreter, backend | budgets | tests | events recorded | untraced run s | traced run s "
        "| traced ÷ untraced |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in suites:
        budgets = "default" if r["budgets"] == "default" else "spent at the first call"
        lines.append(
            f"| {r['configuration']} | {budgets} | {r['tests']} | {r['events']:,} | {r['untraced_s']:.2f} | "
            f"{r['traced_s']:.2f} | {r['traced_s'] / r['untraced_s']:.2f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="the interpreter of the comparison (a path or a version)")
    parser.add_argument("--cases", type=int, default=100, help="parametrized cases per test function of the suite")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=60, help="rounds of the in-process workload")
    parser.add_argument("--tests", type=int, default=200, help="tests of the in-process suite past its budgets")
    parser.add_argument("--pip-cache", default=os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache"))
    parser.add_argument(
        "--only", nargs="+", default=["host", "settrace", "monitoring"], help="suite configurations to run"
    )
    parser.add_argument("--skip-in-process", action="store_true", help="only the suite part")
    parser.add_argument("--record", action="store_true", help="append the results to bench/RESULTS.md")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)  # part 1, in the child
    args = parser.parse_args()
    if args.in_process:
        json.dump(in_process(args.repeat, args.rounds, args.tests), sys.stdout)
        return
    sys.path.insert(0, str(ROOT))
    from pipeline.sandbox.interpreters import resolve_python

    python = resolve_python(args.python)
    child = subprocess.run(
        [
            python,
            "-s",
            "-B",
            __file__,
            "--in-process",
            "--repeat",
            str(args.repeat),
            "--rounds",
            str(args.rounds),
            "--tests",
            str(args.tests),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
    )
    inprocess = json.loads(child.stdout)
    suites = suite_runs(python, args.cases, args.repeat, args.pip_cache, tuple(args.only))
    text = tables(inprocess, suites, args.cases)
    print(text)
    for r in suites:
        if r["untraced_tests"] != r["tests"] or r["violations"]:
            print(f"{r['configuration']} ({r['budgets']}): {r['untraced_tests']} untraced tests, {r['violations']}")
    if args.record:
        command = (
            f"$ .venv/bin/python bench/monitoring.py --python {args.python} --cases {args.cases} "
            f"--repeat {args.repeat} --record"
        )
        note = (
            f"{time.strftime('%Y-%m-%d')}, `{command}` ({os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end):"
        )
        with open(ROOT / "bench" / "RESULTS.md", "a", encoding="utf-8") as handle:
            handle.write(f"\n## sys.monitoring backend (issue 13, item 4)\n\n{note}\n\n{text}\n")


if __name__ == "__main__":
    main()
