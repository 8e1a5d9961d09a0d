"""Reading a dataset the way a consumer does (through its manifest) and comparing two of them."""

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq

# The columns that identify a row of a table (what "same row ids" means when comparing runs); other tables
# use all their flat columns.
ROW_IDS = {
    "traces": ("trace_id",),
    "trajectories": ("trajectory_id",),
    "failures": ("unit_id", "source_id", "stage", "error_type"),
    "duplicates": ("source_id", "duplicate_of"),
}


def manifest_of(out: str | Path) -> dict | None:
    path = Path(out) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def check_manifest(out: str | Path) -> dict:
    """The manifest, after checking what a reader relies on: every listed shard exists with its size and
    sha256, no shard or temporary file lies outside the listing, and no unit failed."""
    root = Path(out)
    manifest = manifest_of(root)
    assert manifest is not None, f"{root} has no manifest.json"
    listed = {}
    for table in manifest["tables"].values():
        for shard in table["shards"]:
            data = (root / shard["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == shard["sha256"], shard["path"]
            assert len(data) == shard["bytes"], shard["path"]
            assert pq.ParquetFile(root / shard["path"]).metadata.num_rows == shard["rows"], shard["path"]
            listed[shard["path"]] = shard
    on_disk = {str(p.relative_to(root)) for p in root.glob("*/*.parquet")}
    assert on_disk == set(listed), f"shards not in the manifest: {sorted(on_disk - set(listed))}"
    assert not [p for p in root.rglob(".tmp-*")], "temporary files left behind"
    assert manifest["failed_units"] == {}
    return manifest


def row_ids(out: str | Path, manifest: dict) -> dict[str, list[tuple]]:
    """Per table, the sorted row ids of every row the manifest's shards hold (duplicates kept)."""
    ids = {}
    for name, table in manifest["tables"].items():
        rows = []
        for shard in table["shards"]:
            data = pq.read_table(Path(out) / shard["path"])
            columns = ROW_IDS.get(name) or tuple(f.name for f in data.schema if f.type.num_fields == 0)
            rows += list(zip(*(data.column(c).to_pylist() for c in columns), strict=True))
        ids[name] = sorted(rows, key=repr)
    return ids


def assert_same_dataset(out: str | Path, reference: str | Path) -> None:
    """`out` holds what the uninterrupted `reference` run holds: same row ids per table, no duplicated
    row, nothing missing, and the very same shard files (deterministic names and bytes)."""
    mine, theirs = check_manifest(out), check_manifest(reference)
    assert mine["config_hash"] == theirs["config_hash"]
    ids, expected = row_ids(out, mine), row_ids(reference, theirs)
    for name in expected:
        assert len(set(ids[name])) == len(ids[name]), f"duplicate rows in {name}"
        assert ids[name] == expected[name], f"{name} rows differ from the uninterrupted run"
    assert shard_files(mine) == shard_files(theirs)


def shard_files(manifest: dict) -> dict[str, list[tuple]]:
    return {
        name: [(s["path"], s["rows"], s["sha256"]) for s in table["shards"]]
        for name, table in manifest["tables"].items()
    }
