"""Every table opens with the trainers' usual readers: HF datasets (streaming and not), polars, pyarrow.dataset."""

import polars as pl
import pyarrow.dataset as pads
import pytest

from pipeline.engine.reader import read_manifest, shard_file
from schemas import TABLES

datasets = pytest.importorskip("datasets")


def shard_files(dataset: str) -> dict[str, list[str]]:
    """{table: its shard files, through the manifest} for the tables with rows."""
    import pyarrow.fs as pafs

    manifest = read_manifest(pafs.LocalFileSystem(), dataset)
    assert manifest is not None
    return {
        name: [shard_file(dataset, shard["path"]) for shard in table["shards"]]
        for name, table in manifest["tables"].items()
        if table["rows"]
    }


def test_every_table_opens_with_hf_datasets_polars_and_pyarrow(python_dataset, go_dataset, packed, repos_dataset):
    found = {}
    for dataset in (python_dataset, go_dataset, packed, repos_dataset):
        found.update(shard_files(dataset))
    assert set(found) == set(TABLES)
    for name, files in found.items():
        rows = sum(pl.read_parquet(path).height for path in files)
        assert pads.dataset(files, format="parquet").count_rows() == rows
        eager = datasets.load_dataset("parquet", data_files=files, split="train")
        assert eager.num_rows == rows, name
        streamed = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True)
        first = next(iter(streamed))
        assert set(first) == set(TABLES[name].SCHEMA.names), name
