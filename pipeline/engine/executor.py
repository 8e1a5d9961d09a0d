"""The unit executor: skip if done → run the stages, writing their rows as they come → the completion record.

This is the only place where a unit's rows become files, whatever the source (docs/architecture.md §4): a kind's
`produce` writes rows to the unit's `UnitSink` in batches as it makes them (so a unit is never held whole), and
returns its counters with any rows left to write. It is plain Python; `pipeline.engine.orchestrate` decides
where it runs.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from pipeline.engine.dataset import UnitRecord, finished_unit, write_unit_record
from pipeline.engine.memory import unit_peak_rss
from pipeline.engine.reader import open_root
from pipeline.engine.stats import StageOutput
from pipeline.writers.parquet import ROW_GROUP_BYTES, ShardInfo, TableShardWriter, remove_stale_shards
from schemas import TABLES, schema_of


class UnitSink:
    """Where a unit's rows go as they are made: `write(table, rows)` turns a batch into Arrow at once (the
    dicts are freed) and appends it to that table's `TableShardWriter`; `close` returns the shards per table.

    Batches are written in the order they come, so a unit that writes the same batches writes the same bytes."""

    def __init__(self, out: str, unit: int, zstd_level: int):
        self.fs, self.root = open_root(out)
        self.unit, self.zstd_level = unit, zstd_level
        self._writers: dict[str, TableShardWriter | None] = {}  # every table named, in order; None: no rows yet

    def write(self, table: str, rows: list[dict]) -> None:
        writer = self._writers.setdefault(table, None)
        if not rows:
            return
        if writer is None:
            row_group_bytes = getattr(TABLES[table], "ROW_GROUP_BYTES", ROW_GROUP_BYTES)  # small for random access
            writer = TableShardWriter(
                self.fs, self.root, table, schema_of(table), self.unit, self.zstd_level, row_group_bytes=row_group_bytes
            )
            self._writers[table] = writer
        writer.write(pa.Table.from_pylist(rows, schema=schema_of(table)))

    def close(self) -> dict[str, list[ShardInfo]]:
        return {name: writer.close() if writer else [] for name, writer in self._writers.items()}

    def abort(self) -> None:
        for writer in self._writers.values():
            if writer is not None:
                writer.abort()


class Produce(Protocol):
    """A kind's `produce`, its config bound: writes the unit's rows to `sink` as it makes them and returns its
    stage counters, with any rows it kept (written after the streamed ones)."""

    def __call__(self, payload: Any, unit_id: str, *, sink: UnitSink) -> StageOutput: ...


@dataclass(frozen=True)
class Unit:
    """One unit of work: a chunk of function records, a repo@commit, a Go program.

    `fingerprint` identifies the unit's input (see `fingerprint`): a completion record is reused only
    when both the config hash and the fingerprint match, so an edited input is never skipped as done.
    """

    index: int
    unit_id: str
    payload: Any
    fingerprint: str = ""


def fingerprint(*parts) -> str:
    """A stable hash of JSON-able parts (the content a unit computes from)."""
    payload = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def execute_unit(unit: Unit, produce: Produce, out: str, config_hash: str, zstd_level: int) -> UnitRecord:
    """Run one unit to completion, or return its completion record if it already finished."""
    fs, root = open_root(out)
    done = finished_unit(fs, root, unit.index, config_hash)
    if done is not None and done.fingerprint == unit.fingerprint:
        return done
    sink = UnitSink(out, unit.index, zstd_level)
    try:
        output = produce(unit.payload, unit.unit_id, sink=sink)
        for name, rows in output.tables.items():
            sink.write(name, rows)
        shards = sink.close()
    except BaseException:
        sink.abort()
        raise
    for name in TABLES:  # a dead earlier attempt may have written more shards, or tables this one has not
        remove_stale_shards(fs, root, name, unit.index, len(shards.get(name, [])))
    record = UnitRecord(unit.index, unit.unit_id, config_hash, shards, output.counters_dict(), unit.fingerprint)
    record.peak_rss_bytes = unit_peak_rss()
    write_unit_record(fs, root, record)
    return record
