"""Benchmark: Go program runs/s through the pipeline against plain `go test -trace` of the same programs.

    .venv/bin/python bench/go.py [--runs N] [--repeat R] [--record]

Programs: the bundled test packages that pass (examples/go: bank_mutex_test, subtests_shards, two_tests,
waitgroup_test), N runs each. Measured side by side in each of R rounds, the best round of each kept:

1. `go test -count=1 -trace=F .` once per run (the go command checks the build cache, links, runs);
2. `go test -c` once per program, then the test binary with `-test.trace=F` once per run (the bare cost
   of running under runtime/trace);
3. the pipeline's stage in this process: `trace_program` (bwrap sandbox, harness build and N runs,
   strict output checks, raw traces zstd-compressed) + `next_event_rows`, program after program, with the
   harness's source rewriting on (the default: channel and sync operations name their objects) and off
   (`--no-rewrite`), side by side in each round;
4. the whole job once (`run_job` of the Go kind, local Ray with --workers CPUs, shards and manifest written),
   Ray's start-up included.

Plain `go test` runs use the host's normal build cache; the pipeline uses its warm caches (built once
per machine before timing starts). `--record` appends the figures to bench/RESULTS.md under `## Go`.
"""

import argparse
import dataclasses
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.job import run_job  # noqa: E402
from pipeline.kinds.go import GoConfig, GoKind  # noqa: E402
from pipeline.sandbox import make_sandbox  # noqa: E402
from pipeline.sources.go_programs import GoProgram, discover_programs  # noqa: E402
from pipeline.stages.go.next_event import next_event_rows  # noqa: E402
from pipeline.stages.go.runs import GoSettings, GoTools, trace_program  # noqa: E402

PROGRAMS = ("bank_mutex_test", "subtests_shards", "two_tests", "waitgroup_test")


def copy_programs(into: Path) -> Path:
    """The chosen examples as a --programs directory, each with the go.mod the harness would write."""
    root = into / "programs"
    for name in PROGRAMS:
        shutil.copytree(ROOT / "examples" / "go" / name, root / name)
        if not (root / name / "go.mod").exists():
            (root / name / "go.mod").write_text("module prog\n\ngo 1.26\n")
    return root


def plain_go_test(go: str, programs: Path, runs: int, scratch: Path) -> float:
    start = time.perf_counter()
    for name in PROGRAMS:
        for index in range(runs):
            subprocess.run(
                [go, "test", "-count=1", f"-trace={scratch}/{name}-{index}.trace", "."],
                cwd=programs / name,
                check=True,
                capture_output=True,
            )
    return time.perf_counter() - start


def compiled_test_binary(go: str, programs: Path, runs: int, scratch: Path) -> float:
    start = time.perf_counter()
    for name in PROGRAMS:
        binary = scratch / f"{name}.test"
        subprocess.run([go, "test", "-c", "-o", str(binary), "."], cwd=programs / name, check=True, capture_output=True)
        for index in range(runs):
            subprocess.run(
                [str(binary), f"-test.trace={scratch}/{name}-{index}.trace", "-test.count=1"],
                cwd=programs / name,
                check=True,
                capture_output=True,
            )
    return time.perf_counter() - start


def pipeline_stage(programs: list[GoProgram], settings: GoSettings, tools: GoTools) -> tuple[float, int]:
    start = time.perf_counter()
    events = 0
    for program in programs:
        result = trace_program(program, settings, make_sandbox("bwrap", settings.limits()), "bench", tools)
        runs, failures = result.rows("go_runs"), result.rows("failures")
        next_event_rows(program.program_id, runs, settings.min_prefix_runs)
        assert not failures and all(r["status"] in ("ok", "leak") for r in runs), failures  # two_tests may leak
        events += sum(r["n_events"] for r in runs)
    return time.perf_counter() - start, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    settings = GoSettings(runs=args.runs)
    tools = GoTools.resolve(settings)
    go = tools.toolchain.go
    total = args.runs * len(PROGRAMS)
    with tempfile.TemporaryDirectory(prefix="bench-go-") as temp:
        temp = Path(temp)
        programs_dir = copy_programs(temp)
        programs = [p for p in discover_programs(str(programs_dir)) if isinstance(p, GoProgram)]
        pipeline_stage(programs[:1], GoSettings(runs=1), tools)  # warm caches, harness
        plain_go_test(go, programs_dir, 1, temp)
        unrewritten = dataclasses.replace(settings, rewrite=False)
        best = {"plain": float("inf"), "binary": float("inf"), "stage": float("inf"), "stage_plain": float("inf")}
        events = 0
        for _ in range(args.repeat):
            scratch = Path(tempfile.mkdtemp(dir=temp))
            best["plain"] = min(best["plain"], plain_go_test(go, programs_dir, args.runs, scratch))
            best["binary"] = min(best["binary"], compiled_test_binary(go, programs_dir, args.runs, scratch))
            seconds, events = pipeline_stage(programs, settings, tools)
            best["stage"] = min(best["stage"], seconds)
            best["stage_plain"] = min(best["stage_plain"], pipeline_stage(programs, unrewritten, tools)[0])
        start = time.perf_counter()
        run_job(GoKind(), str(programs_dir), GoConfig(go=settings), str(temp / "out"), workers=args.workers)
        job = time.perf_counter() - start

    rate = {name: total / seconds for name, seconds in best.items()}
    lines = [
        f"programs: {', '.join(PROGRAMS)}; {args.runs} runs each = {total} runs, {events} program events "
        f"({tools.toolchain.version}, python {platform.python_version()}, {os.cpu_count()} cores, "
        f"best of {args.repeat})",
        f"plain `go test -count=1 -trace` per run: {best['plain']:.2f} s = {rate['plain']:.1f} runs/s",
        f"`go test -c` once + test binary -test.trace per run: {best['binary']:.2f} s = {rate['binary']:.1f} runs/s",
        f"pipeline stage (bwrap, harness build + runs + checks + zstd traces + distributions), one program at a "
        f"time: {best['stage']:.2f} s = {rate['stage']:.1f} runs/s = {rate['stage'] / rate['plain']:.2f}x plain "
        f"go test, {rate['stage'] / rate['binary']:.2f}x the bare test binary",
        f"the same stage without rewriting (--no-rewrite): {best['stage_plain']:.2f} s = "
        f"{rate['stage_plain']:.1f} runs/s; rewriting costs {best['stage'] / best['stage_plain']:.2f}x the stage time",
        f"whole job (run_job of the Go kind, local Ray, {args.workers} workers, start-up and shards included): "
        f"{job:.2f} s = {total / job:.1f} runs/s",
    ]
    print("\n".join(lines))
    if args.record:
        command = (
            f".venv/bin/python bench/go.py --runs {args.runs} --repeat {args.repeat} --workers {args.workers} --record"
        )
        with open(ROOT / "bench" / "RESULTS.md", "a", encoding="utf-8") as handle:
            handle.write(
                f"\n## Go\n\n{time.strftime('%Y-%m-%d')}, `$ {command}`:\n\n```\n" + "\n".join(lines) + "\n```\n"
            )


if __name__ == "__main__":
    main()
