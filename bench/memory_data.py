"""Generated inputs of bench/memory.py (issue 29 item 5), deterministic for a seed; run alone to make them:

    PYTHONPATH=$PWD .venv/bin/python bench/memory_data.py --out /tmp/memory-data [--cases a,b,c] [--scale 1.0]

(a) `repo/`: a git repository (one commit, fixed dates) of a small setuptools package, `benchkit`, whose suite has
    5,000 tests (100 modules of 30 plain tests and one test parametrized 20 ways), each calling the package's
    functions; `repo/repos.toml` is its `[[repo]]` manifest for `tracegen trace-repos`.
(b) `trajectories/`: a dataset of 10⁶ `trajectories` rows and the 250,000 `traces` rows they walk, as a finished
    function job compacted into one group would leave it: `trajectories/compact-00000.parquet` and
    `traces/compact-00000.parquet` (written by the compaction's own streaming writer, 96 MiB row groups), one
    completion record per unit of 16 traces listing its slice of each file, and the manifest. The rows are real
    output of the project's code: a pool of traces is recorded here, in this process, by a small `sys.settrace`
    recorder over generated functions (loops, nested calls; the bundled examples' shapes), and the project's
    trajectory sampler (`sample_trajectories_stage`, 2 per trace and direction) walks them. The dataset repeats
    that pool under fresh ids (trace_id, source_id, trajectory_id), so it costs seconds, not a tracing job.
(c) `go/`: a Go dataset of one program run 4 times, each run 50,000 scheduler events (a worker pool: create, start,
    block on channels and a mutex, unblock, yield, end), the runs identical in their events: `go_programs`,
    `go_runs`, and `go_next_event` as the project's own stage (`next_event_rows`) computes it from those runs, so
    one `exact` row per depth (50,001) besides the global and per-goroutine rows. No `go_traces` (the raw traces:
    pack never reads them).

`--scale` multiplies the sizes (tests, trajectories, events), for a quick run. Every output directory carries a
`generated.json` naming its case, scale and seed; an existing one with the same values is kept as it is.
"""

import argparse
import hashlib
import json
import random
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.dataset import UnitRecord, write_manifest, write_unit_record  # noqa: E402
from pipeline.engine.executor import UnitSink  # noqa: E402
from pipeline.engine.reader import open_root  # noqa: E402
from pipeline.stages.go.next_event import next_event_rows  # noqa: E402
from pipeline.stages.trajectories import SamplingSettings, sample_trajectories_stage  # noqa: E402
from pipeline.writers.parquet import ROW_GROUP_BYTES, ShardInfo, write_merged_shard  # noqa: E402
from schemas import schema_of  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from workload import TEXT_FUNCTIONS  # noqa: E402

FULL = {"tests": 5000, "trajectories": 1_000_000, "events": 50_000}
STAMP = "generated.json"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.org",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.org",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
}


def sizes(scale: float) -> dict[str, int]:
    return {name: max(1, round(value * scale)) for name, value in FULL.items()}


def _fresh(directory: Path, stamp: dict) -> bool:
    """True when `directory` already holds what `stamp` describes; else empties it."""
    path = directory / STAMP
    if path.exists() and all(json.loads(path.read_text()).get(key) == value for key, value in stamp.items()):
        return False
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return True


def _digest(*parts) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


# -- (a) the repository ------------------------------------------------------------------------------------------

PACKAGE = (
    TEXT_FUNCTIONS
    + """

def insertion_sort(values):
    items = list(values)
    for i in range(1, len(items)):
        key = items[i]
        j = i - 1
        while j >= 0 and items[j] > key:
            items[j + 1] = items[j]
            j -= 1
        items[j + 1] = key
    return items


def gcd(a, b):
    steps = 0
    while b:
        a, b = b, a % b
        steps += 1
    return a, steps


def collatz_length(n):
    length = 1
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        length += 1
    return length


def checksum(data, modulus=65521):
    a, b = 1, 0
    for byte in data.encode():
        a = (a + byte) % modulus
        b = (b + a) % modulus
    return (b << 16) | a


class RunningStats:
    def __init__(self):
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, value):
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)
        return self.mean

    def variance(self):
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0


def summarize(values):
    stats = RunningStats()
    for value in values:
        stats.add(value)
    ordered = insertion_sort(values)
    middle = ordered[len(ordered) // 2] if ordered else None
    return {"n": stats.n, "mean": round(stats.mean, 3), "variance": round(stats.variance(), 3), "median": middle}
"""
)

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex bold jumping zebras".split()


def _test_module(module: int, plain: int, params: int, rng: random.Random) -> str:
    lines = ["import pytest", "", "from benchkit import core", ""]
    for t in range(plain):
        kind = (module + t) % 6
        if kind == 0:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
            body = f"    tokens = core.tokenize({text!r})\n    assert core.frequencies(tokens)"
        elif kind == 1:
            values = [rng.randint(-50, 50) for _ in range(rng.randint(3, 10))]
            body = f"    assert core.insertion_sort({values}) == sorted({values})"
        elif kind == 2:
            a, b = rng.randint(10, 5000), rng.randint(10, 5000)
            body = f"    assert core.gcd({a}, {b})[0] >= 1"
        elif kind == 3:
            body = f"    assert core.collatz_length({rng.randint(2, 60)}) >= 1"
        elif kind == 4:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            body = f"    assert core.checksum({text!r}) > 0"
        else:
            values = [rng.randint(0, 99) for _ in range(rng.randint(2, 8))]
            body = f"    assert core.summarize({values})['n'] == {len(values)}"
        lines += [f"def test_m{module:03d}_{t:02d}():", body, "", ""]
    cases = [(rng.randint(2, 40), rng.randint(2, 40)) for _ in range(params)]
    lines += [
        f"@pytest.mark.parametrize('a, b', {cases})",
        f"def test_m{module:03d}_param(a, b):",
        "    g, _ = core.gcd(a, b)",
        "    assert a % g == 0 and b % g == 0",
        "    assert core.collatz_length(a) >= 1",
        "",
    ]
    return "\n".join(lines)


def make_repo(directory: Path, tests: int, seed: int) -> Path:
    """The repository of case (a) in `directory/benchkit`; returns the manifest's path."""
    stamp = {"case": "a", "tests": tests, "seed": seed}
    manifest = directory / "repos.toml"
    if not _fresh(directory, stamp):
        return manifest
    rng = random.Random(seed)
    repo = directory / "benchkit"
    files = {
        "pyproject.toml": textwrap.dedent(
            """\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "benchkit"
            version = "0.1.0"

            [tool.setuptools.packages.find]
            where = ["src"]

            [tool.pytest.ini_options]
            testpaths = ["tests"]
            """
        ),
        "src/benchkit/__init__.py": "",
        "src/benchkit/core.py": PACKAGE.lstrip("\n"),
    }
    per_module = 50
    modules = max(1, tests // per_module)
    params = min(20, per_module // 2)
    for module in range(modules):
        count = per_module if module < modules - 1 else tests - per_module * (modules - 1)
        files[f"tests/test_m{module:03d}.py"] = _test_module(module, max(0, count - params), min(params, count), rng)
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "benchkit"]):
        subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=repo, env=GIT_ENV, check=True)
    manifest.write_text(f'[[repo]]\nname = "benchkit"\nurl = "{repo}"\nref = "main"\n')
    (directory / STAMP).write_text(json.dumps(stamp))
    return manifest


# -- (b) trajectories in one compacted file ---------------------------------------------------------------------

POOL_CODE = [
    (
        "def f(xs, target):\n    lo, hi = 0, len(xs) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n"
        "        if xs[mid] == target:\n            return mid\n        elif xs[mid] < target:\n"
        "            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
        lambda rng: (sorted(rng.sample(range(200), rng.randint(5, 40))), rng.randint(0, 199)),
    ),
    (
        "def f(values):\n    items = list(values)\n    for i in range(1, len(items)):\n        key = items[i]\n"
        "        j = i - 1\n        while j >= 0 and items[j] > key:\n            items[j + 1] = items[j]\n"
        "            j -= 1\n        items[j + 1] = key\n    return items\n",
        lambda rng: ([rng.randint(-99, 99) for _ in range(rng.randint(3, 12))],),
    ),
    (
        "def step(n):\n    if n % 2 == 0:\n        return n // 2\n    return 3 * n + 1\n\n\n"
        "def f(n):\n    length = 1\n    while n != 1:\n        n = step(n)\n        length += 1\n    return length\n",
        lambda rng: (rng.randint(2, 40),),
    ),
    (
        "def normalize(word):\n    return word.strip('.,;:!?').lower()\n\n\ndef f(text):\n    counts = {}\n"
        "    for word in text.split():\n        key = normalize(word)\n        counts[key] = counts.get(key, 0) + 1\n"
        "    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))\n    return ranked[:3]\n",
        lambda rng: (" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16))),),
    ),
    (
        "def f(n, memo=None):\n    if memo is None:\n        memo = {}\n    if n in memo:\n        return memo[n]\n"
        "    if n < 2:\n        result = n\n    else:\n        result = f(n - 1, memo) + f(n - 2, memo)\n"
        "    memo[n] = result\n    return result\n",
        lambda rng: (rng.randint(3, 14),),
    ),
    (
        "def f(a, b):\n    steps = 0\n    while b:\n        a, b = b, a % b\n        steps += 1\n    return a, steps\n",
        lambda rng: (rng.randint(10, 10**6), rng.randint(10, 10**6)),
    ),
]


def _value(value) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def record_trace(code: str, args: tuple, max_events: int = 10_000) -> tuple[list[dict], str]:
    """(events, exit) of `f(*args)` from `code`, recorded here with sys.settrace in the `traces` event shape."""
    filename = "<bench>"
    namespace: dict = {}
    exec(compile(code, filename, "exec"), namespace)
    lines = code.splitlines()
    events: list[dict] = []
    frames: dict[int, int] = {}  # live frames: id(frame) -> frame_id, by order of first call
    next_id = [0]
    stack: list[int] = []

    def local_pairs(frame) -> list[tuple[str, str]]:
        return [(name, _value(value)) for name, value in frame.f_locals.items() if not name.startswith(".")]

    def add(frame, kind: str, arg) -> None:
        if len(events) >= max_events:
            return
        frame_id = frames[id(frame)]
        events.append(
            {
                "index": len(events),
                "event": kind,
                "frame_id": frame_id,
                "parent_frame_id": stack[-2] if len(stack) > 1 else None,
                "depth": len(stack) - 1,
                "lineno": frame.f_lineno,
                "function": frame.f_code.co_qualname,
                "source": lines[frame.f_lineno - 1] if 0 < frame.f_lineno <= len(lines) else "",
                "locals": local_pairs(frame),
                "arg": _value(arg) if kind == "return" else None,
            }
        )

    def local(frame, kind, arg):
        if kind in ("line", "return"):
            add(frame, kind, arg)
            if kind == "return":
                stack.pop()
                frames.pop(id(frame), None)
        return local

    def hook(frame, kind, arg):
        if kind != "call" or frame.f_code.co_filename != filename or frame.f_code.co_name == "<lambda>":
            return None
        frames[id(frame)] = next_id[0]
        next_id[0] += 1
        stack.append(frames[id(frame)])
        add(frame, "call", arg)
        return local

    sys.settrace(hook)
    try:
        namespace["f"](*args)
        exit_ = "normal"
    except Exception:
        exit_ = "error"
    finally:
        sys.settrace(None)
    return events, exit_


def trace_pool(size: int, seed: int) -> list[dict]:
    """`size` traces rows of the generated functions on seeded inputs."""
    rng = random.Random(seed)
    rows = []
    for index in range(size):
        code, inputs = POOL_CODE[index % len(POOL_CODE)]
        args = inputs(rng)
        events, exit_ = record_trace(code, args)
        text_input = ", ".join(map(repr, args))
        rows.append(
            {
                "trace_id": _digest("pool", index),
                "source_id": f"pool_{index:05d}",
                "source_kind": "function",
                "repo_url": None,
                "commit": None,
                "path": None,
                "qualname": "f",
                "test_id": None,
                "code": code,
                "input": text_input,
                "python_version": "3.12.0",
                "tracer_version": "bench",
                "exit": exit_,
                "truncated": False,
                "truncation_reason": None,
                "n_events": len(events),
                "n_capped_values": 0,
                "events": events,
                "repr_mode": "structural",
                "perturbed": None,
            }
        )
    return rows


def make_trajectories(directory: Path, trajectories: int, seed: int, unit_traces: int = 16) -> dict:
    """The compacted dataset of case (b) in `directory`; returns its stamp (with sizes)."""
    stamp = {"case": "b", "trajectories": trajectories, "seed": seed, "unit_traces": unit_traces}
    if not _fresh(directory, stamp):
        return json.loads((directory / STAMP).read_text())
    started = time.perf_counter()
    pool_rows = trace_pool(2000, seed)
    sampled = sample_trajectories_stage(pool_rows, SamplingSettings(seed=seed, per_trace=2), "pool")
    per_trace: dict[str, list[dict]] = {}
    for row in sampled.rows("trajectories"):
        per_trace.setdefault(row["trace_id"], []).append(row)
    pool_rows = [row for row in pool_rows if len(per_trace.get(row["trace_id"], ())) == 4]
    pool_traces = pa.Table.from_pylist(pool_rows, schema=schema_of("traces"))
    flat = [row for trace in pool_rows for row in per_trace[trace["trace_id"]]]
    pool_trajectories = pa.Table.from_pylist(flat, schema=schema_of("trajectories"))
    n_traces = -(-trajectories // 4)
    units = -(-n_traces // unit_traces)
    rng = random.Random(seed + 1)
    choice = [rng.randrange(len(pool_rows)) for _ in range(n_traces)]

    def ids(prefix: str, start: int, count: int) -> pa.Array:
        return pa.array([_digest(seed, prefix, i) for i in range(start, start + count)], pa.string())

    def traces_parts(batch: int = 4000):
        for start in range(0, n_traces, batch):
            picked = choice[start : start + batch]
            part = pool_traces.take(pa.array(picked, pa.int64()))
            part = part.set_column(0, pool_traces.schema.field(0), ids("trace", start, len(picked)))
            sources = pa.array([f"gen_{i:07d}" for i in range(start, start + len(picked))], pa.string())
            yield part.set_column(1, pool_traces.schema.field(1), sources)

    def trajectory_parts(batch: int = 4000):
        for start in range(0, n_traces, batch):
            picked = choice[start : start + batch]
            rows = [4 * p + k for p in picked for k in range(4)]
            count = min(len(rows), trajectories - 4 * start)
            part = pool_trajectories.take(pa.array(rows[:count], pa.int64()))
            traces = [start + i // 4 for i in range(count)]
            part = part.set_column(0, pool_trajectories.schema.field(0), ids("trajectory", 4 * start, count))
            part = part.set_column(
                1, pool_trajectories.schema.field(1), pa.array([_digest(seed, "trace", t) for t in traces], pa.string())
            )
            yield part.set_column(
                2, pool_trajectories.schema.field(2), pa.array([f"gen_{t:07d}" for t in traces], pa.string())
            )

    fs, root = open_root(str(directory))
    files = {
        "traces": write_merged_shard(
            fs, root, "traces/compact-00000.parquet", schema_of("traces"), traces_parts(), 3, ROW_GROUP_BYTES
        ),
        "trajectories": write_merged_shard(
            fs,
            root,
            "trajectories/compact-00000.parquet",
            schema_of("trajectories"),
            trajectory_parts(),
            3,
            ROW_GROUP_BYTES,
        ),
    }
    records = []
    for unit in range(units):
        first = unit * unit_traces
        count = min(unit_traces, n_traces - first)
        slices = {}
        for table, per in (("traces", 1), ("trajectories", 4)):
            info = files[table]
            offset = first * per
            rows = min(count * per, info.rows - offset)
            slices[table] = [ShardInfo(info.path, rows, info.bytes, info.sha256, offset, info.rows)]
        counters = {"trajectories": {"in": count, "out": slices["trajectories"][0].rows, "dropped": {}, "seconds": 0.0}}
        record = UnitRecord(unit, f"functions-{unit:05d}", "bench-memory", slices, counters, _digest("unit", unit))
        write_unit_record(fs, root, record)
        records.append(record)
    compaction = {"mode": "auto", "target_bytes": 512 << 20, "row_group_bytes": 0, "min_shards": 256, "groups": 1}
    write_manifest(
        fs,
        root,
        records,
        kind="functions",
        config={"generated_by": "bench/memory_data.py", "seed": seed},
        config_hash="bench-memory",
        seed=seed,
        code_version="bench",
        extra={"compaction": compaction},
    )
    stamp.update(
        traces=n_traces,
        units=units,
        pool_traces=len(pool_rows),
        mean_text_bytes=round(sum(len(r["text"].encode()) for r in flat) / len(flat)),
        file_bytes={table: info.bytes for table, info in files.items()},
        seconds=round(time.perf_counter() - started, 1),
    )
    (directory / STAMP).write_text(json.dumps(stamp))
    return stamp


# -- (c) one Go program, 4 runs of N scheduler events -----------------------------------------------------------

GO_SOURCE = """package main

import (
	"fmt"
	"sync"
)

func worker(id int, jobs <-chan int, results chan<- int, mu *sync.Mutex, total *int, wg *sync.WaitGroup) {
	defer wg.Done()
	for job := range jobs {
		mu.Lock()
		*total += job
		mu.Unlock()
		results <- job * id
	}
}

func main() {
	jobs := make(chan int)
	results := make(chan int, 4)
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := 0
	for id := 1; id <= 6; id++ {
		wg.Add(1)
		go worker(id, jobs, results, &mu, &total, &wg)
	}
	go func() {
		for n := 0; ; n++ {
			jobs <- n
		}
	}()
	sum := 0
	for i := 0; i < 1000000; i++ {
		sum += <-results
	}
	fmt.Println(sum, total)
}
"""


def go_events(count: int, seed: int) -> list[tuple]:
    """A worker pool's scheduler events: (goroutine, event, reason, peer, function, line)."""
    rng = random.Random(seed)
    events: list[tuple] = []
    for g in range(1, 8):
        events.append((g, "GoCreate", "", 0, "main.main", 26 if g < 7 else 28))
    cycle = [
        ("GoStart", "", -1, "main.worker", 10),
        ("GoBlock", "chan receive", -1, "main.worker", 10),
        ("GoUnblock", "", 7, "main.main.func1", 30),
        ("GoStart", "", -1, "main.worker", 11),
        ("GoBlock", "sync", -1, "main.worker", 11),
        ("GoUnblock", "", 1, "main.worker", 13),
        ("GoStart", "", -1, "main.worker", 12),
        ("GoBlock", "chan send", -1, "main.worker", 14),
        ("GoUnblock", "", 0, "main.main", 35),
        ("GoStart", "", -1, "main.worker", 15),
        ("GoSched", "preempted", -1, "main.worker", 10),
    ]
    while len(events) < count:
        g = rng.randint(1, 6)
        for name, reason, peer, function, line in cycle[: rng.randint(3, len(cycle))]:
            events.append((g, name, reason, peer, function, line))
        if rng.random() < 0.2:
            events.append((0, "GoBlock", "chan receive", -1, "main.main", 35))
            events.append((0, "GoUnblock", "", g, "main.worker", 14))
            events.append((0, "GoStart", "", -1, "main.main", 35))
    return events[:count]


def make_go(directory: Path, events: int, seed: int, runs: int = 4) -> dict:
    stamp = {"case": "c", "events": events, "seed": seed, "runs": runs}
    if not _fresh(directory, stamp):
        return json.loads((directory / STAMP).read_text())
    started = time.perf_counter()
    program_id = "worker_pool_long"
    program_hash = hashlib.sha256(GO_SOURCE.encode()).hexdigest()
    program = {
        "program_id": program_id,
        "program_hash": program_hash,
        "mode": "main",
        "module_path": "prog",
        "files": [{"path": "main.go", "text": GO_SOURCE}],
        "timeout_s": 30.0,
        "timeout_source": "default",
    }
    sequence = go_events(events, seed)
    gpaths = {g: "0" if g == 0 else f"0.{g}" for g in range(8)}
    run_rows = []
    for run in range(runs):
        rng = random.Random(seed * 100 + run)
        clock = 0
        kept = []
        for index, (g, name, reason, peer, function, line) in enumerate(sequence):
            clock += rng.randint(50, 5000)
            kept.append(
                {
                    "index": index,
                    "goroutine": g,
                    "gpath": gpaths[g],
                    "event": name,
                    "reason": reason,
                    "peer": peer,
                    "function": function,
                    "file": "main.go" if function else "",
                    "line": line,
                    "time_ns": clock,
                    "category": "",
                    "message": "",
                }
            )
        run_rows.append(
            {
                "program_id": program_id,
                "program_hash": program_hash,
                "run_index": run,
                "status": "ok",
                "mode": "main",
                "race": False,
                "gomaxprocs": None,
                "exit_code": 0,
                "duration_ms": 30000,
                "complete": True,
                "truncated": False,
                "trace_error": None,
                "stderr_tail": None,
                "stdout_tail": None,
                "generations": 30,
                "leaked": [],
                "n_events": len(kept),
                "events": kept,
                "goroutines": [
                    {
                        "goroutine": g,
                        "gpath": gpaths[g],
                        "start_function": "main.main" if g == 0 else ("main.main.func1" if g == 7 else "main.worker"),
                        "final_state": "Runnable",
                        "final_reason": "",
                    }
                    for g in range(8)
                ],
                "trace_bytes": None,
                "trace_stored": False,
                "go_version": "go1.26.0",
                "harness_version": "bench",
            }
        )
    distributions = next_event_rows(program_id, run_rows)
    tables = {"go_programs": [program], "go_runs": run_rows, "go_next_event": distributions.rows("go_next_event")}
    fs, root = open_root(str(directory))
    sink = UnitSink(str(directory), 0, 3)
    for name, rows in tables.items():
        sink.write(name, rows)
    shards = sink.close()
    record = UnitRecord(0, f"go-00000-{program_id}", "bench-memory", shards, distributions.counters_dict(), "bench")
    write_unit_record(fs, root, record)
    write_manifest(
        fs,
        root,
        [record],
        kind="go",
        config={"generated_by": "bench/memory_data.py", "seed": seed},
        config_hash="bench-memory",
        seed=seed,
        code_version="bench",
    )
    kinds: dict[str, int] = {}
    for row in tables["go_next_event"]:
        kinds[row["prefix_kind"]] = kinds.get(row["prefix_kind"], 0) + 1
    stamp.update(next_event_rows=kinds, seconds=round(time.perf_counter() - started, 1))
    (directory / STAMP).write_text(json.dumps(stamp))
    return stamp


def generate(out: Path, cases: list[str], scale: float, seed: int) -> dict[str, Path]:
    """The inputs of `cases` under `out` (made when missing or different); {case: input path}."""
    n = sizes(scale)
    inputs = {}
    for case in cases:
        if case == "a":
            inputs[case] = make_repo(out / "repo", n["tests"], seed)
        elif case == "b":
            make_trajectories(out / "trajectories", n["trajectories"], seed)
            inputs[case] = out / "trajectories"
        elif case == "c":
            make_go(out / "go", n["events"], seed)
            inputs[case] = out / "go"
        else:
            raise ValueError(f"unknown case {case!r}: a, b or c")
    return inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory of the generated inputs")
    parser.add_argument("--cases", default="a,b,c")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies tests, trajectories and events")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    inputs = generate(Path(args.out).resolve(), args.cases.split(","), args.scale, args.seed)
    for case, path in inputs.items():
        stamp = path.parent / STAMP if path.is_file() else path / STAMP
        print(f"({case}) {path}: {stamp.read_text()}")
    print(f"{time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
