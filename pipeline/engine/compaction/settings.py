"""When a dataset's loose shards are compacted and how large the compacted files and their row groups are."""

from dataclasses import dataclass

from pipeline.engine.dataset import UnitRecord
from pipeline.writers.parquet import ROW_GROUP_BYTES
from schemas import TABLES

MODES = ("auto", "always", "never")


@dataclass(frozen=True)
class CompactionSettings:
    """When and how large: `auto` compacts the loose units once some table has `min_shards` loose shards or
    `target_bytes` of them; `always` compacts any loose unit; `never` none (broken groups are mended in
    every mode). `row_group_bytes` 0: each table's own (96 MiB; a table may set ROW_GROUP_BYTES)."""

    mode: str = "auto"
    target_bytes: int = 512 << 20
    row_group_bytes: int = 0
    min_shards: int = 256

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"--compact must be one of {', '.join(MODES)}, got {self.mode!r}")
        for name in ("target_bytes", "min_shards"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"compaction {name} must be an int >= 1, got {getattr(self, name)!r}")
        if type(self.row_group_bytes) is not int or self.row_group_bytes < 0:
            raise ValueError(f"compaction row_group_bytes must be an int >= 0, got {self.row_group_bytes!r}")

    def wanted(self, loose: list[UnitRecord]) -> bool:
        if not loose or self.mode == "never":
            return False
        if self.mode == "always":
            return True
        for table in TABLES:
            infos = [info for record in loose for info in record.shards.get(table, [])]
            if len(infos) >= self.min_shards or sum(info.bytes for info in infos) >= self.target_bytes:
                return True
        return False

    def row_group_for(self, table: str) -> int:
        return self.row_group_bytes or getattr(TABLES[table], "ROW_GROUP_BYTES", ROW_GROUP_BYTES)

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "target_bytes": self.target_bytes,
            "row_group_bytes": self.row_group_bytes,
            "min_shards": self.min_shards,
        }
