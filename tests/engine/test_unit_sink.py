"""A unit's rows are written as they come (pipeline/engine/executor.py `UnitSink`, pipeline/writers/parquet.py
`TableShardWriter`): row groups and shards are cut by bytes, memory holds one row group, the same batches give the
same bytes, and a unit that fails leaves no file behind."""

import hashlib
import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from pipeline.engine.executor import Unit, UnitSink, execute_unit
from pipeline.engine.stats import StageOutput
from pipeline.writers.parquet import TableShardWriter
from schemas import schema_of


def duplicate(n: int, width: int = 1000) -> dict:
    """A `duplicates` row of about `width` bytes."""
    return {
        "unit_id": "u",
        "source_id": f"k{n}",
        "duplicate_of": "d-" + "x" * width,
        "similarity": 1.0,
        "input_ref": f"input:{n}",
    }


def batches(n_batches: int, rows: int, width: int = 1000) -> list[list[dict]]:
    return [[duplicate(b * rows + r, width) for r in range(rows)] for b in range(n_batches)]


def files(root) -> dict[str, str]:
    return {
        os.path.relpath(os.path.join(d, f), root): hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
        for d, _, names in os.walk(root)
        for f in names
    }


def test_row_groups_and_shards_are_cut_by_bytes_and_hold_every_row_in_order(tmp_path):
    writer = TableShardWriter(
        pafs.LocalFileSystem(),
        str(tmp_path),
        "duplicates",
        schema_of("duplicates"),
        unit=3,
        shard_bytes=400_000,
        row_group_bytes=100_000,
    )
    sent = batches(20, 50)  # ~1 MB in 20 batches of ~50 KB
    for batch in sent:
        writer.write(pa.Table.from_pylist(batch, schema=schema_of("duplicates")))
    shards = writer.close()
    assert [s.path for s in shards] == [f"duplicates/part-00003-{seq:04d}.parquet" for seq in range(len(shards))]
    assert len(shards) >= 2
    read = []
    for shard in shards:
        meta = pq.ParquetFile(tmp_path / shard.path).metadata
        assert meta.num_row_groups >= 2 and meta.num_rows == shard.rows
        assert all(meta.row_group(g).total_byte_size < 250_000 for g in range(meta.num_row_groups))
        read += pq.read_table(tmp_path / shard.path).to_pylist()
    assert read == [row for batch in sent for row in batch]


def test_the_writer_holds_one_row_group_not_the_table(tmp_path):
    """Arrow memory in use while 40 MB pass through stays near one row group (2 MB) plus one batch."""
    writer = TableShardWriter(
        pafs.LocalFileSystem(), str(tmp_path), "duplicates", schema_of("duplicates"), 0, row_group_bytes=2 << 20
    )
    base = pa.total_allocated_bytes()
    peak = 0
    for batch in batches(80, 500):  # 80 batches of ~0.5 MB
        writer.write(pa.Table.from_pylist(batch, schema=schema_of("duplicates")))
        peak = max(peak, pa.total_allocated_bytes() - base)
    [shard] = writer.close()
    assert shard.rows == 40_000
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MB of Arrow memory in use for a 2 MB row group"


def stream_in_batches(payload, unit_id, sink):
    for batch in batches(*payload):
        sink.write("duplicates", batch)
    return StageOutput({"failures": []})


def test_a_streamed_unit_rewrites_the_same_bytes_and_records_every_table(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for out in (one, two):
        record = execute_unit(Unit(0, "u0", (30, 100)), stream_in_batches, str(out), "h", 3)
    assert files(one) == files(two)
    assert set(record.shards) == {"duplicates", "failures"} and record.shards["failures"] == []
    assert sum(s.rows for s in record.shards["duplicates"]) == 3000


def test_a_unit_that_fails_midway_leaves_no_file(tmp_path):
    def fails_after_writing(payload, unit_id, sink):
        for batch in batches(10, 100):
            sink.write("duplicates", batch)
        raise RuntimeError("the stage broke")

    with pytest.raises(RuntimeError, match="the stage broke"):
        execute_unit(Unit(0, "u0", None), fails_after_writing, str(tmp_path), "h", 3)
    assert [name for name in files(tmp_path) if not name.startswith("_")] == []


def test_sink_writes_rows_returned_after_the_streamed_ones(tmp_path):
    sink = UnitSink(str(tmp_path), 1, 3)
    sink.write("duplicates", [duplicate(0)])
    sink.write("duplicates", [])
    sink.write("duplicates", [duplicate(1)])
    shards = sink.close()
    [shard] = shards["duplicates"]
    assert [row["source_id"] for row in pq.read_table(tmp_path / shard.path).to_pylist()] == ["k0", "k1"]
