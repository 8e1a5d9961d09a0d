"""Loader throughput per worker: PackedLoader against plain pyarrow and HF `datasets` streaming, side by side.

    .venv/bin/tracegen trace-functions --input examples/functions.jsonl --out /tmp/bench-fn
    .venv/bin/tracegen pack --data /tmp/bench-fn --out /tmp/bench-packed --seq-len 2048
    .venv/bin/python bench/loader.py --packed /tmp/bench-packed [--repeat 5] [--batch 8]

One process = one worker. Each reader delivers the same shards' `input_ids` and `loss_mask` as
[batch, seq_len] numpy arrays; the best of `--repeat` rounds is kept. PackedLoader is measured twice:
with its row-group cache (the dataset here fits in it) and with a one-group cache, where the global
shuffle makes nearly every sample decode its row group again (what a dataset much larger than the cache
costs). pyarrow and HF read the shards in order (no shuffle), the cheapest reading there is.
"""

import argparse
import platform
import time

import numpy as np
import pyarrow.parquet as pq

from pipeline.engine.reader import open_dataset, shard_file
from pipeline.loader import PackedLoader

PARAMETERS = 1e9
MFU = 0.40
PEAK_BF16_FLOPS = 989e12  # H100 SXM and H200: dense bf16 tensor-core peak


def shard_paths(packed: str) -> list[str]:
    dataset = open_dataset(packed, "pack one first")
    return [shard_file(dataset.root, path) for path in dataset.paths("packed")]


def packed_loader(packed: str, batch: int, cache: int) -> int:
    tokens = 0
    for micro in PackedLoader(packed, batch, cache_row_groups=cache):
        tokens += micro["input_ids"].size
    return tokens


def plain_pyarrow(files: list[str], batch: int, seq_len: int) -> int:
    tokens = 0
    for path in files:
        for record in pq.ParquetFile(path).iter_batches(batch_size=batch, columns=["input_ids", "loss_mask"]):
            ids = record.column(0).flatten().to_numpy().reshape(-1, seq_len)
            mask = record.column(1).flatten().to_numpy().reshape(-1, seq_len)
            tokens += ids.size + 0 * mask.size
    return tokens


def hf_streaming(files: list[str], batch: int) -> int:
    import datasets

    stream = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True)
    stream = stream.select_columns(["input_ids", "loss_mask"]).with_format("numpy")
    tokens = 0
    for record in stream.iter(batch_size=batch):
        tokens += np.stack(record["input_ids"]).size + 0 * np.stack(record["loss_mask"]).size
    return tokens


def best_rate(read, repeat: int) -> tuple[float, int]:
    best, tokens = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        tokens = read()
        best = min(best, time.perf_counter() - start)
    return tokens / best, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packed", required=True, help="a packed dataset (tracegen pack --out)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    files = shard_paths(args.packed)
    probe = PackedLoader(args.packed, args.batch)
    seq_len, samples = probe.shards.seq_len, len(probe.shards)
    readers = {
        "PackedLoader (global shuffle, row-group cache)": lambda: packed_loader(args.packed, args.batch, 64),
        "PackedLoader (global shuffle, 1-group cache)": lambda: packed_loader(args.packed, args.batch, 1),
        "plain pyarrow (in order)": lambda: plain_pyarrow(files, args.batch, seq_len),
        "HF datasets streaming (in order)": lambda: hf_streaming(files, args.batch),
    }
    rates = {name: best_rate(read, args.repeat) for name, read in readers.items()}
    needed = PEAK_BF16_FLOPS * MFU / (6 * PARAMETERS)
    print(
        f"packed: {samples} samples x {seq_len} tokens, {len(files)} shards; batch {args.batch}; best of {args.repeat}"
    )
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, one process")
    hf = rates["HF datasets streaming (in order)"][0]
    print("| reader | tokens/s per worker | x HF streaming | x a 1B model on one H100/H200 |")
    print("|---|---|---|---|")
    for name, (rate, _) in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / hf:.2f} | {rate / needed:.1f} |")
    print(
        f"a 1B-parameter model at {MFU:.0%} MFU of {PEAK_BF16_FLOPS / 1e12:.0f} TFLOP/s (bf16 dense) consumes "
        f"{PEAK_BF16_FLOPS * MFU:.3g} / (6 x {PARAMETERS:.0e}) = {needed:,.0f} tokens/s"
    )


if __name__ == "__main__":
    main()
