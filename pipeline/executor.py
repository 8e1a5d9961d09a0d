"""The unit executor: skip if done → run the stages → write shards → write the completion record.

This is the only place where a unit's rows become files, whatever the source (DESIGN.md §10). It is
plain Python; `pipeline.orchestrate` decides where it runs.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.dataset import UnitRecord, finished_unit, open_root, write_unit_record
from pipeline.writers.parquet import remove_stale_shards, write_table_shards
from schemas import TABLES, schema_of

# produce(payload, unit_id) -> ({table: rows}, {stage: counters dict})
Produce = Callable[[Any, str], tuple[dict[str, list[dict]], dict[str, dict]]]


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
    tables, counters = produce(unit.payload, unit.unit_id)
    shards = {}
    for name, rows in tables.items():
        table = pa.Table.from_pylist(rows, schema=schema_of(name))
        shards[name] = write_table_shards(fs, root, name, table, unit.index, zstd_level)
    for name in TABLES:  # a dead earlier attempt may have written more shards, or tables this one has not
        remove_stale_shards(fs, root, name, unit.index, len(shards.get(name, [])))
    record = UnitRecord(unit.index, unit.unit_id, config_hash, shards, counters, unit.fingerprint)
    write_unit_record(fs, root, record)
    return record
