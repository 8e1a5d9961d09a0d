"""The one reader of datasets (pipeline/engine/reader.py): a versioned root resolves to its latest committed
version, its shards (its own and an earlier version's) are read in manifest order a batch, a row-group range
or a row group at a time; and it sits below dataset.py and versions.py, which never import each other."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from import_graph import import_graph, project_modules

from pipeline.engine.dataset import write_text
from pipeline.engine.reader import (
    open_dataset,
    open_root,
    shard_batches,
    shard_row_groups,
    table_rows,
    version_dir,
)
from pipeline.engine.versions import commit_version


def test_the_reader_sits_below_the_engine_and_dataset_never_imports_versions():
    graph = import_graph(project_modules())
    engine = {name for name in graph if name.startswith("pipeline.engine.")}
    assert not graph["pipeline.engine.reader"] & engine
    assert "pipeline.engine.versions" not in graph["pipeline.engine.dataset"]
    assert "pipeline.engine.dataset" in graph["pipeline.engine.versions"]


def _shard(root: Path, path: str, first: int, rows: int) -> dict:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"i": list(range(first, first + rows))}), root / path, row_group_size=2)
    return {"path": path, "rows": rows, "bytes": (root / path).stat().st_size, "sha256": "-"}


def _version(base: Path, n: int, shards: list[dict]) -> None:
    fs, root = open_root(str(base))
    manifest = {"format": "tracegen-dataset/2", "tables": {"traces": {"shard_count": len(shards), "shards": shards}}}
    write_text(fs, f"{version_dir(root, n)}/manifest.json", json.dumps(manifest))
    commit_version(fs, root, n, {"version": n})


def test_a_versioned_root_reads_its_latest_version_in_manifest_order_by_batch_range_and_row_group(tmp_path):
    _version(tmp_path, 1, [_shard(tmp_path / "versions" / "1", "traces/part-00000-0000.parquet", 0, 5)])
    own = _shard(tmp_path / "versions" / "2", "traces/part-00001-0000.parquet", 5, 4)
    _version(tmp_path, 2, [{**own}, {"path": "../1/traces/part-00000-0000.parquet", "rows": 5}])
    (tmp_path / "versions" / "3").mkdir()  # a refresh building version 3: not committed, never read

    dataset = open_dataset(str(tmp_path), "hint")
    assert dataset.uri == f"{tmp_path}/versions/2"
    assert [row["i"] for row in table_rows(str(tmp_path), "traces")] == [5, 6, 7, 8, 0, 1, 2, 3, 4]
    paths = dataset.paths("traces")
    batches = list(shard_batches(dataset.uri, paths, batch_rows=3))
    assert [batch.num_rows for batch in batches] == [3, 1, 3, 2]  # never across shards
    ranged = shard_batches(dataset.uri, paths, row_groups={paths[1]: (1, 2), paths[0]: (0, 0)})
    assert [row for batch in ranged for row in batch.column("i").to_pylist()] == [2, 3]
    groups = list(shard_row_groups(dataset.uri, paths, ["i"]))
    assert [group.column("i").to_pylist() for group in groups] == [[5, 6], [7, 8], [0, 1], [2, 3], [4]]
    assert dataset.footer(paths[1]).num_row_groups == 3


def test_no_dataset_is_a_value_error_naming_the_option_and_what_to_give(tmp_path):
    with pytest.raises(ValueError, match=r"^--data '.*' holds no dataset \(no manifest.json\); give one$"):
        open_dataset(str(tmp_path), "give one", "--data")
    with pytest.raises(ValueError, match="holds no dataset"):
        next(table_rows(str(tmp_path), "traces"))
