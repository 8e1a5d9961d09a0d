"""A refresh over compacted versions: unchanged units stay referenced by their compacted files, a compacted
file holding a dropped unit is re-written (its other units, by slice) into the new version, and retention
keeps every version a kept manifest still reads."""

import json
from pathlib import Path

from test_refresh import configs, ids, records, write_jsonl

from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.reader import open_root, read_manifest, table_rows, table_shards
from pipeline.refresh.sequence import refresh

SMALL = CompactionSettings(mode="always", target_bytes=6_000, row_group_bytes=4_000)


def files(version: Path) -> dict[str, list[str]]:
    fs, root = open_root(str(version))
    manifest = read_manifest(fs, root)
    assert manifest is not None
    return {t: [s["path"] for s in table_shards(fs, root, manifest, t)] for t in ("traces", "trajectories")}


def globbed(version: Path, table: str) -> set[str]:
    """What `polars.scan_parquet(versions/N/{table}/*.parquet)` reads: the version's own files."""
    return {p.name for p in (version / table).glob("*.parquet")}


def test_refresh_after_compaction_references_unchanged_groups_and_rewrites_broken_ones(tmp_path, ray_local):
    source = tmp_path / "f.jsonl"
    (tmp_path / "sources.toml").write_text('[[functions]]\npath = "f.jsonl"\n')
    sources, root = str(tmp_path / "sources.toml"), tmp_path / "root"
    write_jsonl(source, records(24))
    first = refresh(sources, str(root), configs(tmp_path), report=False, compaction=SMALL)
    assert first.version == 1
    v1 = files(root / "versions" / "1")
    assert all("/compact-" in p for paths in v1.values() for p in paths) and len(v1["traces"]) >= 3
    assert {f"traces/{name}" for name in globbed(root / "versions" / "1", "traces")} == set(v1["traces"])
    assert not (root / "versions" / "1" / "_compaction").exists() or not any(
        (root / "versions" / "1" / "_compaction").iterdir()
    )

    write_jsonl(source, records(23) + records(4, start=100))  # r23 gone (its chunk dropped), four new records
    second = refresh(sources, str(root), configs(tmp_path), report=False, compaction=SMALL)
    assert second.version == 2 and second.units_dropped == 1
    v2 = files(root / "versions" / "2")
    inherited = [p for p in v2["traces"] if p.startswith("../1/")]
    assert inherited and set(inherited) < {f"../1/{p}" for p in v1["traces"]}  # the broken group is not listed
    own = [p for p in v2["traces"] if not p.startswith("../")]
    assert own and {f"traces/{name}" for name in globbed(root / "versions" / "2", "traces")} == set(own)

    scratch = tmp_path / "scratch"
    refresh(sources, str(scratch), configs(tmp_path), report=False)
    assert ids(str(root)) == ids(str(scratch))  # the same rows as a from-scratch refresh, none doubled
    traces = list(table_rows(str(root), "traces"))
    assert len(traces) == len({row["trace_id"] for row in traces})
    assert {row["source_id"] for row in traces} == {f"r{i}" for i in [*range(23), *range(100, 104)]}

    write_jsonl(source, records(23) + records(5, start=100))
    third = refresh(sources, str(root), configs(tmp_path), keep=1, report=False, compaction=SMALL)
    assert third.version == 3
    manifest = json.loads((root / "versions" / "3" / "manifest.json").read_text())
    assert manifest["format"] == "tracegen-dataset/2" and manifest["compaction"]["groups"] >= 1
    still_read = {p.split("/")[1] for p in files(root / "versions" / "3")["traces"] if p.startswith("../")}
    for n in (1, 2):  # a version whose files version 3 reads is kept, the others go
        assert (root / "versions" / str(n)).exists() == (str(n) in still_read)
    assert {row["source_id"] for row in table_rows(str(root), "traces")} == {
        f"r{i}" for i in [*range(23), *range(100, 105)]
    }
