"""The unit executor: skip if done → run the stages → write shards → write the completion record.

This is the only place where a unit's rows become files, whatever the source (docs/architecture.md §4). It is
plain Python; `pipeline.engine.orchestrate` decides where it runs.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.engine.dataset import UnitRecord, finished_unit, open_root, write_unit_record
from pipeline.engine.memory import unit_peak_rss
from pipeline.engine.stats import StageOutput
from pipeline.writers.parquet import ROW_GROUP_BYTES, remove_stale_shards, write_table_shards
from schemas import TABLES, schema_of

# produce(payload, unit_id) -> the unit's rows per table and its stage counters
Produce = Callable[[Any, str], StageOutput]


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
    output = produce(unit.payload, unit.unit_id)
    shards = {}
    for name, rows in output.tables.items():
        table = pa.Table.from_pylist(rows, schema=schema_of(name))
        row_group_bytes = getattr(TABLES[name], "ROW_GROUP_BYTES", ROW_GROUP_BYTES)  # small for random access
        shards[name] = write_table_shards(
            fs, root, name, table, unit.index, zstd_level, row_group_bytes=row_group_bytes
        )
    for name in TABLES:  # a dead earlier attempt may have written more shards, or tables this one has not
        remove_stale_shards(fs, root, name, unit.index, len(shards.get(name, [])))
    record = UnitRecord(unit.index, unit.unit_id, config_hash, shards, output.counters_dict(), unit.fingerprint)
    record.peak_rss_bytes = unit_peak_rss()
    write_unit_record(fs, root, record)
    return record
