"""A dataset directory: per-unit completion records, then `manifest.json`, written last (the commit point).

Layout under the root (a local path or any URI `pyarrow.fs` resolves):
    {table}/part-{unit:05d}-{seq:04d}.parquet   shards, written by the units
    {table}/compact-{group:05d}.parquet          compacted shards: whole units merged (pipeline/engine/compaction/)
    _units/{unit:05d}.json                       completion record of a unit (its shards, or its slices of
                                                 compacted shards, and counters)
    _compaction/                                 a compaction's plan and group records while one is under way
    _index/{table}.parquet                       a table's shard list, when it is too long to inline (format 2)
    stats.json                                   per stage in/out/dropped/seconds, per table rows and bytes
    manifest.json                                the dataset: config, per-table shards and totals, stats
A unit whose completion record exists for the same config hash and input fingerprint is finished and is
skipped on re-run.

Manifest format 2 (`tracegen-dataset/2`, schemas/manifest.md): each table holds `shard_count` and either
`shards` (the list, inline, up to INLINE_SHARDS entries) or `shard_index` (the list as a Parquet file beside
the manifest, with its sha256). This module writes; reading (both forms, and format 1) is
pipeline/engine/reader.py's.

Small files are written one of two ways: `write_text` replaces (a temporary name, then a rename);
`create_exclusive` creates a file only if it is absent, whole or not at all (the commit rule of a version's log
entry and of a table's Delta commit: pipeline/engine/versions.py, pipeline/engine/delta_tables.py).
"""

import datetime as dt
import hashlib
import json
import os
import posixpath
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine.reader import FORMATS, MANIFEST, read_text
from pipeline.engine.stats import merge_counters
from pipeline.writers.parquet import ShardInfo, temporary_path
from schemas import TABLES

FORMAT = FORMATS[-1]  # what this module writes
INDEX = "_index"
INLINE_SHARDS = 1024  # a longer shard list (or refresh unit list) goes to a Parquet index beside the manifest
SHARD_INDEX_SCHEMA = pa.schema(
    [("path", pa.string()), ("rows", pa.int64()), ("bytes", pa.int64()), ("sha256", pa.string())]
)


@dataclass
class UnitRecord:
    """The completion record of one unit of work."""

    unit: int
    unit_id: str
    config_hash: str
    shards: dict[str, list[ShardInfo]] = field(default_factory=dict)
    counters: dict = field(default_factory=dict)
    fingerprint: str = ""
    peak_rss_bytes: int | None = None  # the unit's Ray worker at its most (pipeline/engine/memory.py); None: unknown

    def to_json(self) -> str:
        shards = {table: [info.as_dict() for info in infos] for table, infos in self.shards.items()}
        data = {
            "unit": self.unit,
            "unit_id": self.unit_id,
            "config_hash": self.config_hash,
            "fingerprint": self.fingerprint,
            "shards": shards,
            "counters": self.counters,
        }
        if self.peak_rss_bytes is not None:
            data["peak_rss_bytes"] = self.peak_rss_bytes
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "UnitRecord":
        data = json.loads(text)
        shards = {table: [ShardInfo(**info) for info in infos] for table, infos in data["shards"].items()}
        return cls(
            data["unit"],
            data["unit_id"],
            data["config_hash"],
            shards,
            data["counters"],
            data.get("fingerprint", ""),
            data.get("peak_rss_bytes"),  # records written before it have none
        )


def unit_record_path(root: str, unit: int) -> str:
    return f"{root}/_units/{unit:05d}.json"


def write_text(fs: pafs.FileSystem, path: str, text: str) -> None:
    """Write a small file under a temporary name and rename it into place."""
    temporary = temporary_path(path)
    with fs.open_output_stream(temporary) as sink:
        sink.write(text.encode())
    fs.move(temporary, path)


def create_exclusive(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Create `path` holding `data`, whole or not at all; FileExistsError if it exists already. Locally a
    complete temporary file is hard-linked to `path`; on an object store, a conditional put."""
    if isinstance(fs, pafs.LocalFileSystem):
        directory, name = posixpath.split(path)
        temporary = f"{directory}/.{name.removesuffix('.json')}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        finally:
            os.unlink(temporary)
        return
    _conditional_put(fs, path, data)


def _conditional_put(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """An object store: a create-exclusive put through fsspec (e.g. s3fs, which supports mode "xb")."""
    try:
        import fsspec  # pyright: ignore[reportMissingImports]
    except ImportError:
        raise ValueError(
            f"publishing versions on {fs.type_name!r} needs a conditional put: install fsspec with a client "
            f"that supports mode 'xb' (s3fs >= 2024.12), or use a local root"
        ) from None
    target = fsspec.filesystem(fs.type_name)
    try:
        with target.open(path, "xb") as handle:
            handle.write(data)
    except (NotImplementedError, ValueError) as error:
        raise ValueError(
            f"{fs.type_name!r} has no conditional put ({error}); versions cannot be published there"
        ) from error


def write_unit_record(fs: pafs.FileSystem, root: str, record: UnitRecord) -> None:
    fs.create_dir(f"{root}/_units", recursive=True)
    write_text(fs, unit_record_path(root, record.unit), record.to_json())


def finished_unit(fs: pafs.FileSystem, root: str, unit: int, config_hash: str) -> UnitRecord | None:
    """The unit's completion record if it finished under the same config, else None."""
    text = read_text(fs, unit_record_path(root, unit))
    if text is None:
        return None
    record = UnitRecord.from_json(text)
    return record if record.config_hash == config_hash else None


def write_index(fs: pafs.FileSystem, root: str, name: str, table: pa.Table) -> dict:
    """Write `table` as `_index/{name}.parquet` (temp name, then rename); returns what the manifest records."""
    fs.create_dir(f"{root}/{INDEX}", recursive=True)
    relative = f"{INDEX}/{name}.parquet"
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer, compression="zstd", write_statistics=False)
    data = buffer.getvalue().to_pybytes()
    temporary = temporary_path(f"{root}/{relative}")
    with fs.open_output_stream(temporary) as sink:
        sink.write(data)
    fs.move(temporary, f"{root}/{relative}")
    return {"path": relative, "count": table.num_rows, "sha256": hashlib.sha256(data).hexdigest()}


def manifest_files(records: list[UnitRecord], table: str) -> list[ShardInfo]:
    """The files the units' shards of `table` lie in, each once (a compacted file holds slices of many
    units), sorted by path."""
    files: dict[str, ShardInfo] = {}
    for record in records:
        for info in record.shards.get(table, []):
            files.setdefault(info.path, info.file())
    return [files[path] for path in sorted(files)]


def write_manifest(
    fs: pafs.FileSystem,
    root: str,
    records: list[UnitRecord],
    *,
    kind: str,
    config: dict,
    config_hash: str,
    seed: int | None,
    code_version: str,
    failed_units: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    extra: dict | None = None,
) -> dict:
    """Assemble the manifest from the units' completion records; write `stats.json`, then the manifest last.

    Units that failed are listed (`failed_units`) and contribute nothing; a re-run completes them. `files`
    (name -> sha256) lists what the dataset holds beside its tables (a packed dataset's tokenizer.json).
    A table lists each file once (a compacted file holds many units' slices); past INLINE_SHARDS files the
    list goes to `_index/{table}.parquet`. `extra` adds top-level keys (a refresh's units, compaction).
    """
    tables = {}
    for name, module in TABLES.items():
        shards = manifest_files(records, name)
        tables[name] = {
            "schema_version": module.VERSION,
            "shard_count": len(shards),
            "rows": sum(info.rows for info in shards),
            "bytes": sum(info.bytes for info in shards),
        }
        if len(shards) <= INLINE_SHARDS:
            tables[name]["shards"] = [info.as_dict() for info in shards]
        else:
            listed = pa.Table.from_pylist([info.as_dict() for info in shards], schema=SHARD_INDEX_SCHEMA)
            tables[name]["shard_index"] = write_index(fs, root, name, listed)
    manifest = {
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code_version": code_version,
        "kind": kind,
        "config_hash": config_hash,
        "config": config,
        "seed": seed,
        "units": len(records),
        "failed_units": dict(sorted((failed_units or {}).items())),
        "tables": tables,
        "stats": merge_counters([record.counters for record in records]),
    }
    if files:
        manifest["files"] = dict(sorted(files.items()))
    manifest.update(extra or {})
    stats = {
        "stages": manifest["stats"],
        "failed_units": manifest["failed_units"],
        "tables": {
            name: {"rows": t["rows"], "bytes": t["bytes"], "shards": t["shard_count"]} for name, t in tables.items()
        },
    }
    write_text(fs, f"{root}/stats.json", json.dumps(stats, indent=2, sort_keys=True))
    write_text(fs, f"{root}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True))
    return manifest
