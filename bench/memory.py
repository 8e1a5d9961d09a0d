"""Benchmark: peak memory per task of three large units, each run as a real job through the CLI (issue 29 item 5).

    PYTHONPATH=$PWD .venv/bin/python bench/memory.py --label before --json /tmp/memory-before.json
    PYTHONPATH=$PWD .venv/bin/python bench/memory.py --label after --python-path /work/main \
        --json /tmp/memory-after.json --args "b=--unit-mb 64" --args "c=--task-memory-mb 2048"
    PYTHONPATH=$PWD .venv/bin/python bench/memory.py --cases b --scale 0.01          # a quick smoke run

Cases, on inputs made by bench/memory_data.py (deterministic; made once under --data-dir and reused, so a
"before" and an "after" run read the same files):
(a) `tracegen trace-repos --workers 1` on a generated repository whose suite has 5,000 tests;
(b) `tracegen pack --seq-len 2048 --workers 1` of 10⁶ trajectories (+ their 250,000 traces) in one compacted file;
(c) `tracegen pack --seq-len 2048 --workers 1` of one Go program whose 4 runs have 50,000 scheduler events each.
`--scale` multiplies those sizes; `--cases b@0.1,b` runs a case at its own scale (several sizes in one run).

Each job runs in a subprocess, `python -m pipeline.cli ...` with cwd and PYTHONPATH at `--python-path` (which
checkout's code runs; default this one), so one script measures both. bench/procs.py polls /proc every 100 ms:
the peak RSS of the largest Ray worker process and of its tree (the worker and what it started: a sandbox,
pytest), the driver's own peak, and all of the job's processes together. A job whose worker tree passes
`--kill-mb` is killed (its processes, by pid) and recorded as killed, with the size and time it had reached.
Also reported when the completion records under `OUT/_units/*.json` carry it: the `peak_rss_bytes` the task
measured itself (the largest over the job's units, and how many units reported). Results: a markdown table
(for bench/RESULTS.md "Memory per task") and, with `--json`, every figure.
"""

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import memory_data  # noqa: E402
import procs  # noqa: E402

CASES = {
    "a": ("trace-repos", "{tests:,} tests"),
    "b": ("pack", "{trajectories:,} trajectories"),
    "c": ("pack", "Go, {events:,} events"),
}
MB = 1 << 20


def command(case: str, source: Path, out: Path, cache: Path, extra: list[str]) -> list[str]:
    kind = CASES[case][0]
    argv = [sys.executable, "-m", "pipeline.cli", kind]
    if kind == "trace-repos":
        argv += ["--manifest", str(source), "--cache-dir", str(cache)]
    else:
        argv += ["--data", str(source), "--seq-len", "2048"]
    return argv + ["--out", str(out), "--workers", "1", "--overwrite", *extra]


def reported_peaks(out: Path) -> list[int]:
    """Every `peak_rss_bytes` the completion records under `out/_units/` hold (at any depth)."""
    found: list[int] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "peak_rss_bytes" and isinstance(item, int):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted((out / "_units").glob("*.json")) if (out / "_units").is_dir() else []:
        try:
            walk(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def git_head(path: Path) -> str:
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "?"


def run_case(case: str, scale: float, args: argparse.Namespace, extra: list[str]) -> dict:
    data_dir = Path(args.data_dir).resolve()
    started = time.perf_counter()
    source = memory_data.generate(data_dir / f"scale-{scale:g}", [case], scale, args.seed)[case]
    generated_s = time.perf_counter() - started
    out = Path(args.work_dir).resolve() / f"{args.label}-{case}-{scale:g}"
    shutil.rmtree(out, ignore_errors=True)
    argv = command(case, source, out, Path(args.cache_dir).resolve(), extra)
    env = {**os.environ, "PYTHONPATH": str(args.python_path)}
    log = out.parent / f"{out.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"({case}@{scale:g}) {shlex.join(argv[1:])}", flush=True)
    with open(log, "wb") as sink:
        began = time.perf_counter()
        process = subprocess.Popen(argv, cwd=args.python_path, env=env, stdout=sink, stderr=subprocess.STDOUT)
        peaks = procs.watch(process, args.kill_mb)
        wall = time.perf_counter() - began
    tail = log.read_text(errors="replace")[-3000:]
    reported = reported_peaks(out)
    sizes = memory_data.sizes(scale)
    result = {
        "case": case,
        "scale": scale,
        "input": CASES[case][1].format(**sizes),
        "command": shlex.join(["tracegen", *argv[3:]]),
        "generated_s": round(generated_s, 1),
        "wall_s": round(wall, 1),
        "exit_code": process.returncode,
        "killed": peaks.killed,
        "killed_at_s": None if peaks.killed_at_s is None else round(peaks.killed_at_s, 1),
        "killed_tree_mb": round(peaks.killed_tree_rss / MB),
        "worker_peak_mb": round(peaks.worker_rss / MB),
        "worker_tree_peak_mb": round(peaks.worker_tree_rss / MB),
        "driver_peak_mb": round(peaks.driver_rss / MB),
        "all_processes_peak_mb": round(peaks.all_rss / MB),
        "workers_seen": len(peaks.workers_seen),
        "samples": peaks.samples,
        "task_reported_peak_mb": round(max(reported) / MB) if reported else None,
        "task_reported_units": len(reported),
        "units": len(list((out / "_units").glob("*.json"))) if (out / "_units").is_dir() else 0,
        "log_tail": tail if process.returncode != 0 or peaks.killed else tail[-600:],
    }
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


def status(result: dict) -> str:
    if result["killed"]:
        return f"killed at {result['killed_tree_mb']:,} MB after {result['killed_at_s']} s"
    return "ok" if result["exit_code"] == 0 else f"exit {result['exit_code']}"


def table(results: list[dict], label: str) -> str:
    lines = [
        "| case | input | code | wall s | worker peak MB | worker tree peak MB | task-reported peak MB "
        "| driver peak MB | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        reported = "—"
        if r["task_reported_peak_mb"] is not None:
            reported = f"{r['task_reported_peak_mb']:,} ({r['task_reported_units']} units)"
        lines.append(
            f"| ({r['case']}) {CASES[r['case']][0]} | {r['input']} | {label} | {r['wall_s']} | {r['worker_peak_mb']:,} "
            f"| {r['worker_tree_peak_mb']:,} | {reported} | {r['driver_peak_mb']:,} | {status(r)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="a,b,c", help="a, b, c; CASE@SCALE runs one at its own scale")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the inputs' sizes (default 1: full)")
    parser.add_argument("--python-path", default=str(ROOT), help="the checkout whose code runs (default: this one)")
    parser.add_argument("--label", default="", help="names the code in the table (default: the checkout's HEAD)")
    parser.add_argument("--kill-mb", type=float, default=12000, help="kill a job whose worker tree passes this")
    parser.add_argument("--args", action="append", default=[], help="CASE=ARGS: more options for that case's job")
    parser.add_argument("--data-dir", default="/tmp/tracegen-bench-memory/data", help="generated inputs (reused)")
    parser.add_argument("--work-dir", default="/tmp/tracegen-bench-memory/runs", help="the jobs' --out and logs")
    parser.add_argument("--cache-dir", default="/tmp/tracegen-bench-memory/cache", help="trace-repos --cache-dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the jobs' outputs")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    args.python_path = str(Path(args.python_path).resolve())
    commit = git_head(Path(args.python_path))
    args.label = args.label or commit
    extra: dict[str, list[str]] = {}
    for item in args.args:
        case, _, options = item.partition("=")
        extra.setdefault(case, []).extend(shlex.split(options))
    results = []
    for item in args.cases.split(","):
        case, _, scale = item.partition("@")
        result = run_case(case, float(scale) if scale else args.scale, args, extra.get(case, []))
        print(
            f"  {status(result)}: wall {result['wall_s']} s, worker {result['worker_peak_mb']:,} MB, "
            f"tree {result['worker_tree_peak_mb']:,} MB, driver {result['driver_peak_mb']:,} MB",
            flush=True,
        )
        results.append(result)
        if args.json:  # after every case, so a long run leaves what it measured
            Path(args.json).write_text(json.dumps(report(args, commit, results), indent=2))
    print()
    print(table(results, args.label))


def report(args: argparse.Namespace, commit: str, results: list[dict]) -> dict:
    return {
        "label": args.label,
        "python_path": args.python_path,
        "commit": commit,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}",
        "kill_mb": args.kill_mb,
        "results": results,
    }


if __name__ == "__main__":
    main()
