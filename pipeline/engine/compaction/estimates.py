"""How large a unit's shards will be once merged: the planner's size of each candidate, per table."""

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.reader import read_shard
from pipeline.writers.parquet import ShardInfo
from schemas import TABLES

SAMPLE_SHARDS = 64  # loose shards per table merged on the driver to learn how much smaller they get merged ...
SAMPLE_BYTES = 16 << 20  # ... up to about this many bytes of them (the driver holds them decoded)


def merge_ratios(
    fs: pafs.FileSystem, root: str, records: Sequence[UnitRecord], positions: list[int], zstd_level: int
) -> dict[str, float]:
    """Per table, the size of a merged file over the size of the loose shards it is made of, measured on the
    first loose shards of the candidates, at most SAMPLE_SHARDS of them and SAMPLE_BYTES (written in memory, as
    a group task writes them): a small shard is mostly its footer, so merged files are several times smaller than
    their sources' sum. A table whose first shard is larger than SAMPLE_BYTES is not sampled (ratio 1: such a
    shard is mostly data). Deterministic: the same shards give the same ratios."""
    ratios = {}
    for table in TABLES:
        sample, held = [], 0
        for info in (info for p in positions for info in records[p].shards.get(table, []) if not info.is_slice):
            if len(sample) == SAMPLE_SHARDS or held + info.bytes > SAMPLE_BYTES:
                break
            sample.append(info)
            held += info.bytes
        if not sample:
            continue
        parts = []
        for info in sample:
            parts.append(read_shard(fs, root, info.path))
        sink = pa.BufferOutputStream()
        pq.write_table(pa.concat_tables(parts), sink, compression="zstd", compression_level=zstd_level)
        ratios[table] = min(1.0, sink.getvalue().size / max(1, sum(info.bytes for info in sample)))
    return ratios


def estimated_bytes(record: UnitRecord, ratios: dict[str, float]) -> dict[str, float]:
    """A unit's bytes per table once merged: its shards' times the table's merge ratio, or its share of the
    compacted files it has slices of."""
    return {
        table: sum(_share(info, ratios.get(table, 1.0)) for info in infos) for table, infos in record.shards.items()
    }


def _share(info: ShardInfo, ratio: float) -> float:
    return info.bytes * info.rows / max(1, info.file_rows or 0) if info.is_slice else info.bytes * ratio
