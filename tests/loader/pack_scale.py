"""Large inputs for the packing job, made without tracing anything, and a packing run whose peak RSS is measured.

- `trajectories_dataset`: one `trajectories` file (`trajectories/compact-00000.parquet`, as compaction names a
  group's file) of synthetic trajectories in the formal language's layout, row groups of `row_group_bytes`.
- `long_go_dataset`: one Go program whose identical runs have `n_events` scheduler events each (plus user
  annotations), with the `go_next_event` rows `pipeline.stages.go.next_event` computes from them: an `exact`
  row at every depth.
- `python pack_scale.py DATA OUT SEQ_LEN UNIT_MB`: runs `tracegen pack`'s job in this one process (the units one
  after another, no Ray: the process tree is this process) and prints its peak RSS as JSON (VmHWM, reset at the
  start: a child of a large process starts with its parent's peak).
"""

import json
import random
import resource
import sys

import pyarrow as pa

from pipeline.engine.dataset import UnitRecord, write_manifest
from pipeline.engine.reader import open_root
from pipeline.stages.go.next_event import next_event_rows
from pipeline.writers.parquet import write_merged_shard
from schemas import schema_of

GO_PROGRAM = "kernels/long"
GO_SOURCE = "package main\n\nfunc worker(c chan int) {\n\tfor v := range c {\n\t\t_ = v\n\t}\n}\n\nfunc main() {}\n"


def write_dataset(out: str, tables: dict[str, list[dict]], row_group_bytes: int, batch: int = 200) -> None:
    """A dataset of one compacted group: each table's rows in `{table}/compact-00000.parquet`, a manifest."""
    fs, root = open_root(out)
    shards = {}
    for table, rows in tables.items():
        schema = schema_of(table)
        parts = (pa.Table.from_pylist(rows[i : i + batch], schema=schema) for i in range(0, len(rows), batch))
        info = write_merged_shard(fs, root, f"{table}/compact-00000.parquet", schema, parts, 3, row_group_bytes)
        shards[table] = [info]
    record = UnitRecord(0, "synthetic", "synthetic", shards, {}, "")
    write_manifest(fs, root, [record], kind="synthetic", config={}, config_hash="synthetic", seed=None, code_version="")


def trajectory_text(rng: random.Random, n_steps: int) -> str:
    """A trajectory in the formal language's layout: context, start frame, then `n_steps` action/state pairs."""
    code = "def f(x):  # << START_OF_TRACE\n    y = x\n    return y\n"
    text = [f"<|trace_context_start|>{code}<|frame_sep|>", '<|call_sep|>{"x": 1}<|action_sep|>def f(x):<|frame_sep|>']
    for _ in range(n_steps):
        value = rng.randrange(10**12)
        text.append(f'<|step_over|><|line_sep|>{{"y": {value}}}<|action_sep|>    y = x + {value}<|frame_sep|>')
    return "".join(text) + "<|trace_end|>"


def trajectories_dataset(out: str, n: int, steps: int, row_group_bytes: int, seed: int = 0) -> int:
    """`n` trajectories of `steps` steps, forward and inverse alternately, their traces absent (the group is
    `unknown/...`); returns the bytes of text written."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        text = trajectory_text(rng, steps + i % 7)
        rows.append(
            {
                "trajectory_id": f"t{i:06d}",
                "trace_id": f"trace{i // 3:06d}",
                "source_id": f"source{i // 30}",
                "direction": ("forward", "inverse")[i % 2],
                "seed": 0,
                "policy_version": "synthetic",
                "sample_index": i % 3,
                "actions": [],
                "states": [],
                "exit": "normal",
                "n_tokens": len(text),
                "text": text,
            }
        )
    write_dataset(out, {"trajectories": rows}, row_group_bytes)
    return sum(len(row["text"]) for row in rows)


def go_events(n_events: int) -> list[dict]:
    """A long run: eight workers created, then each in turn started, blocked, unblocked; a user log now and then
    (an annotation, not a scheduler event)."""

    def event(kind: str, goroutine: int, reason: str = "", line: int = 4) -> dict:
        return {
            "goroutine": goroutine,
            "gpath": f"0.{goroutine}",
            "event": kind,
            "reason": reason,
            "peer": 0,
            "function": "main.worker",
            "file": "main.go",
            "line": line,
            "category": "",
            "message": "",
            "object": "",
            "object_state": "",
        }

    events = [event("GoCreate", g, line=9) for g in range(1, 9)]
    cycle = (("GoStart", ""), ("GoBlock", "chan receive"), ("GoUnblock", ""))
    k = 0
    while len([e for e in events if e["event"] != "UserLog"]) < n_events:
        goroutine = 1 + (k // 3) % 8
        kind, reason = cycle[k % 3]
        events.append(event(kind, goroutine, reason, line=4 + k % 3))
        if k % 97 == 0:
            events.append({**event("UserLog", goroutine), "category": "tick", "message": str(k)})
        k += 1
    return [{**e, "index": i, "time_ns": 1000 * i} for i, e in enumerate(events)]


def go_run(run_index: int, events: list[dict]) -> dict:
    return {
        "program_id": GO_PROGRAM,
        "program_hash": "0" * 64,
        "run_index": run_index,
        "status": "ok",
        "mode": "main",
        "race": False,
        "gomaxprocs": None,
        "exit_code": 0,
        "duration_ms": 1,
        "complete": True,
        "truncated": False,
        "trace_error": None,
        "stderr_tail": None,
        "stdout_tail": None,
        "generations": 1,
        "instrumentation": "disabled",
        "rewrite_error": None,
        "leaked": [],
        "n_events": len(events),
        "events": events,
        "goroutines": [],
        "trace_bytes": None,
        "trace_stored": False,
        "go_version": "go1.26",
        "harness_version": "synthetic",
    }


def long_go_dataset(out: str, n_events: int, runs: int = 2) -> None:
    events = go_events(n_events)
    run_rows = [go_run(i, events) for i in range(runs)]
    program = {
        "program_id": GO_PROGRAM,
        "program_hash": "0" * 64,
        "mode": "main",
        "module_path": "example.com/long",
        "files": [{"path": "main.go", "text": GO_SOURCE}],
        "timeout_s": 10.0,
        "timeout_source": "default",
    }
    distributions = next_event_rows(GO_PROGRAM, run_rows).tables["go_next_event"]
    write_dataset(
        out, {"go_programs": [program], "go_runs": run_rows, "go_next_event": distributions}, 8 << 20, batch=1
    )


def pack_in_process(data: str, out: str, seq_len: int, unit_mb: int) -> dict:
    """The pack job with its units run here, in order (no Ray); returns the manifest."""
    import pipeline.engine.job as job
    from pipeline.engine.compaction.settings import CompactionSettings
    from pipeline.kinds.pack import PackConfig, PackKind
    from pipeline.stages.pack.packing import PackSettings

    def run_units(units, work, **_):
        return [work(unit) for unit in units], {}

    job.start_ray = lambda *_: None
    job.run_units = run_units
    sizing = {"unit_mb": unit_mb} if "unit_mb" in PackConfig.__dataclass_fields__ else {}  # 3fc10f9 has none
    # Bytes: what is measured is the units' streaming; the driver's BPE training reads a bounded sample of its own
    # (`bpe_sample`), and in process its text would count in this peak.
    config = PackConfig(packing=PackSettings(seq_len=seq_len), tokenizer="bytes", **sizing)
    return job.run_job(PackKind(), data, config, out, compaction=CompactionSettings(mode="never"))


def reset_peak_rss() -> bool:
    """Start this process's peak RSS afresh (a forked child starts with its parent's, and exec keeps it)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb(reset: bool) -> float:
    """This process's peak RSS since `reset_peak_rss` (VmHWM), else since it began (ru_maxrss)."""
    if reset:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    data, out, seq_len, unit_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    reset = reset_peak_rss()
    manifest = pack_in_process(data, out, seq_len, unit_mb)
    peak_mb = peak_rss_mb(reset)
    print(json.dumps({"peak_rss_mb": round(peak_mb, 1), "units": manifest["units"], "stats": manifest["stats"]}))
