"""Files, manifest size and driver memory of a large dataset, before and after compaction (issue 13 item 6).

A simulation: generated `traces` rows (no tracing; 10-18 events each, with random locals), written by the
real writer (`UnitSink`, in --workers processes) as a job's units write them (one shard per unit
of --unit-rows rows, a completion record each), then the real manifest, then the real compaction stage
(Ray tasks, default sizes) and the new manifest. Measured side by side in one run: files per table, bytes
per file, manifest.json size (format 1 as the code before wrote it: every shard inline; format 2), the
driver's peak Python memory while writing each manifest and while compacting (tracemalloc), and the time a
reader (polars, and pyarrow) needs to scan the table through many small files and through few large ones.
Then linear extrapolation to --scale.

    .venv/bin/python bench/compaction.py --rows 1000000 --workers 2
"""

import argparse
import hashlib
import json
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.engine.compaction.commit import compact  # noqa: E402
from pipeline.engine.compaction.settings import CompactionSettings  # noqa: E402
from pipeline.engine.dataset import UnitRecord, write_manifest  # noqa: E402
from pipeline.engine.executor import UnitSink  # noqa: E402
from pipeline.engine.orchestrate import start_ray  # noqa: E402
from pipeline.engine.reader import open_root  # noqa: E402

WORDS = ["total", "items", "x", "y", "acc", "result", "node", "i", "j", "key", "value", "seen", "stack"]


def template_events(rng: random.Random) -> list[dict]:
    """One generated trace's events: call, lines, return, with a few locals of plausible reprs."""
    n = rng.randint(10, 18)
    names = rng.sample(WORDS, 4)
    events = []
    for index in range(n):
        kind = "call" if index == 0 else "return" if index == n - 1 else "line"
        local = [{"name": name, "value": repr(rng.randint(-999, 99999))} for name in names[: 1 + index % 4]]
        if index % 5 == 3:
            local.append({"name": "items", "value": repr([rng.randint(0, 99) for _ in range(rng.randint(1, 8))])})
        events.append(
            {
                "index": index,
                "event": kind,
                "frame_id": 0,
                "parent_frame_id": None,
                "depth": 0,
                "lineno": index + 1,
                "function": "f",
                "source": f"    {names[0]} = {names[1]} + {rng.randint(0, 9)}" if kind == "line" else "def f(x):",
                "locals": local,
                "arg": repr(rng.randint(0, 999)) if kind == "return" else None,
            }
        )
    return events


def unit_rows(unit: int, rows: int, rng: random.Random) -> list[dict]:
    out = []
    for i in range(rows):
        rid = f"rec{unit * rows + i}"
        events = template_events(rng)
        out.append(
            {
                "trace_id": hashlib.sha256(rid.encode()).hexdigest(),
                "source_id": rid,
                "source_kind": "function",
                "qualname": "f",
                "code": f"def f(x):\n    y = x + {unit % 97}\n    return y * {i}\n",
                "input": str(i),
                "python_version": "3.11.7",
                "tracer_version": "bench",
                "exit": "normal",
                "truncated": False,
                "n_events": len(events),
                "n_capped_values": 0,
                "repr_mode": "structural",
                "events": events,
            }
        )
    return out


def write_units(span: tuple[int, int, int, str]) -> list[UnitRecord]:
    """Units [begin, end) written as a job's units write them (in a worker process): their records."""
    begin, end, rows, out = span
    fs, root = open_root(out)
    rng = random.Random(begin)
    records = []
    for unit in range(begin, end):
        sink = UnitSink(out, unit, 3)
        sink.write("traces", unit_rows(unit, rows, rng))
        records.append(UnitRecord(unit, f"u-{unit:05d}", "bench", sink.close(), {}, str(unit)))
    return records


def peak_mb(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def manifest_kwargs() -> dict:
    return dict(kind="bench", config={}, config_hash="bench", seed=None, code_version="bench")


def v1_manifest_bytes(records: list[UnitRecord]) -> int:
    """The manifest the code before this change wrote: every shard of every table inline."""
    shards = sorted((info.as_dict() for r in records for info in r.shards.get("traces", [])), key=lambda s: s["path"])
    return len(json.dumps({"tables": {"traces": {"shards": shards}}}, indent=2, sort_keys=True).encode())


def scan_seconds(directory: Path) -> tuple[float, float, int]:
    import polars as pl
    import pyarrow.dataset as pads

    start = time.perf_counter()
    rows = pl.scan_parquet(str(directory / "*.parquet")).select(pl.len()).collect().item()
    polars_s = time.perf_counter() - start
    start = time.perf_counter()
    pads.dataset(str(directory), format="parquet").to_table(columns=["source_id", "n_events"])
    return polars_s, time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--unit-rows", type=int, default=16, help="rows per unit (the function job's chunk size)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scale", type=int, default=100_000_000, help="rows to extrapolate to")
    parser.add_argument("--target-mb", type=int, default=CompactionSettings.target_bytes >> 20)
    args = parser.parse_args()

    temp = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    out = temp / "out"
    fs, root = open_root(str(out))
    units = args.rows // args.unit_rows
    start = time.perf_counter()
    spans = [(begin, min(units, begin + 500), args.unit_rows, str(out)) for begin in range(0, units, 500)]
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        records = [record for part in pool.map(write_units, spans) for record in part]
    write_s = time.perf_counter() - start
    shard_bytes = sum(info.bytes for r in records for info in r.shards["traces"])
    print(
        f"wrote {args.rows:,} generated traces rows as {units:,} unit shards ({shard_bytes / 2**20:,.1f} MiB) "
        f"in {write_s:.0f} s"
    )

    _, records_mem = peak_mb(lambda: [UnitRecord.from_json(record.to_json()) for record in records])
    v1_bytes = v1_manifest_bytes(records)
    write_manifest(fs, root, records, **manifest_kwargs())  # once first: imports are not the manifest's memory
    _, before_mem = peak_mb(lambda: write_manifest(fs, root, records, **manifest_kwargs()))
    before_manifest = (out / "manifest.json").stat().st_size
    before_index = sum(p.stat().st_size for p in (out / "_index").glob("*")) if (out / "_index").exists() else 0
    before_scan = scan_seconds(out / "traces")

    start_ray(None, args.workers)
    settings = CompactionSettings(target_bytes=args.target_mb << 20)
    start = time.perf_counter()
    compacted, compact_mem = peak_mb(
        lambda: compact(fs, root, records, settings, 3, uri=str(out), persist_records=False)
    )
    _, after_mem = peak_mb(
        lambda: write_manifest(
            fs, root, compacted.records, **manifest_kwargs(), extra=compacted.manifest_extra(settings)
        )
    )
    compacted.finish()
    compact_s = time.perf_counter() - start
    after_manifest = (out / "manifest.json").stat().st_size
    files = sorted((out / "traces").glob("*.parquet"))
    sizes = [p.stat().st_size for p in files]
    import pyarrow.parquet as pq

    groups = [pq.ParquetFile(p).metadata for p in files]
    row_groups = sum(m.num_row_groups for m in groups)
    after_scan = scan_seconds(out / "traces")
    assert after_scan[2] == before_scan[2] == args.rows, (before_scan, after_scan)

    factor = args.scale / args.rows
    print(
        f"compaction (Ray, {args.workers} workers, target {args.target_mb} MiB): {compact_s:.0f} s, "
        f"{shard_bytes / 2**20 / compact_s:.1f} MiB/s"
    )
    print()
    print(
        f"| traces table | {args.rows:,} rows: before | after compaction | {args.scale:,} rows (x{factor:g}): "
        f"before | after |"
    )
    print("|---|---|---|---|---|")
    fill = max(sizes) / settings.target_bytes if len(sizes) > 1 else 0.75  # how full a closed group's file is
    after_files = max(1, -(-int(sum(sizes) * factor) // int(settings.target_bytes * fill)))
    print(f"| files | {units:,} | {len(files)} | {units * factor:,.0f} | ~{after_files:,} |")
    print(
        f"| bytes per file | {shard_bytes / units / 1e3:.1f} KB | {sum(sizes) / len(sizes) / 2**20:.0f} MiB "
        f"(min {min(sizes) / 2**20:.0f}, max {max(sizes) / 2**20:.0f}) | same | "
        f"~{sum(sizes) * factor / after_files / 2**20:.0f} MiB (target {settings.target_bytes >> 20}) |"
    )
    print(f"| row groups per file | 1 | {row_groups / len(files):.1f} | 1 | same |")
    print(
        f"| manifest.json, format 1 (every shard inline) | {v1_bytes / 1e6:.2f} MB | - | "
        f"{v1_bytes * factor / 1e9:.1f} GB | - |"
    )
    print(
        f"| manifest.json + _index, format 2 | {before_manifest / 1e3:.1f} KB + {before_index / 1e6:.2f} MB | "
        f"{after_manifest / 1e3:.1f} KB | {before_manifest / 1e3:.1f} KB + {before_index * factor / 1e6:.0f} MB"
        f" | ~{after_manifest / 1e3:.1f} KB + {after_files * 0.2:.0f} KB |"
    )
    print(
        f"| driver peak (tracemalloc), writing the manifest | {before_mem:.0f} MiB | {after_mem:.1f} MiB | "
        f"{before_mem * factor / 1024:.1f} GiB | {after_mem * factor / 1024:.1f} GiB |"
    )
    print(
        f"| driver peak (tracemalloc), compacting (plan, merge-ratio sample, results, new records) | - | "
        f"{compact_mem:.0f} MiB | - | {compact_mem * factor / 1024:.1f} GiB (at most: linear) |"
    )
    print(
        f"| driver: the units' completion records (any job holds them) | {records_mem:.1f} MiB | same | "
        f"{records_mem * factor / 1024:.1f} GiB | same |"
    )
    print(
        f"| polars scan_parquet count, glob | {before_scan[0]:.2f} s | {after_scan[0]:.2f} s | "
        f"{before_scan[0] * factor / 60:.0f} min | {after_scan[0] * factor / 60:.1f} min |"
    )
    print(
        f"| pyarrow.dataset, 2 columns | {before_scan[1]:.2f} s | {after_scan[1]:.2f} s | "
        f"{before_scan[1] * factor / 60:.0f} min | {after_scan[1] * factor / 60:.1f} min |"
    )
    print(
        f"\nwriting the unit shards: {write_s:.0f} s; compacting: {compact_s:.0f} s ({len(files)} files, "
        f"{sum(sizes) / 2**20:.0f} MiB from {shard_bytes / 2**20:.0f} MiB of unit shards)"
    )
    shutil.rmtree(temp)


if __name__ == "__main__":
    main()
