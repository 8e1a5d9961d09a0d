"""Every reader on a compacted dataset: the same rows as before compaction, through the manifest (the loader,
`tracegen inspect`, table_rows, pack, re-sampling, rederive-go) and through a glob (polars, HF datasets).

The session's real datasets are copied and compacted by `tracegen compact`'s code with Ray tasks, into files
small enough that each table has several."""

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from loader_helpers import pack

from pipeline.compact import compact_dataset
from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.job import run_job
from pipeline.engine.reader import open_root, read_manifest, table_rows, table_shards
from pipeline.inspect import summarize
from pipeline.kinds.rederive_go import RederiveConfig, RederiveKind
from pipeline.kinds.resample import ResampleConfig, ResampleKind
from pipeline.loader import PackedLoader
from schemas import TABLES

datasets = pytest.importorskip("datasets")
SMALL = CompactionSettings(mode="always", target_bytes=40_000, row_group_bytes=16_000)


def compacted(dataset: str, tmp_path: Path) -> str:
    copy = tmp_path / Path(dataset).parent.name
    shutil.copytree(dataset, copy)
    compact_dataset(str(copy), SMALL)
    return str(copy)


def listed(dataset: str) -> dict[str, list[str]]:
    fs, root = open_root(dataset)
    manifest = read_manifest(fs, root)
    assert manifest is not None
    return {
        t: [s["path"] for s in table_shards(fs, root, manifest, t)] for t in TABLES if manifest["tables"][t]["rows"]
    }


def test_tables_read_the_same_through_the_manifest_and_through_a_glob(python_dataset, go_dataset, packed, tmp_path):
    for dataset in (python_dataset, go_dataset, packed):
        after = compacted(dataset, tmp_path)
        for table, paths in listed(after).items():
            assert all(path.startswith(f"{table}/compact-") for path in paths)
            assert list(table_rows(after, table)) == list(table_rows(dataset, table)), table
            globbed = pl.scan_parquet(f"{after}/{table}/*.parquet").collect()
            assert globbed.height == len(list(table_rows(dataset, table)))
            files = sorted(str(p) for p in Path(after, table).glob("*.parquet"))
            assert datasets.load_dataset("parquet", data_files=files, split="train").num_rows == globbed.height
        assert table_counts(summarize(after)) == table_counts(summarize(dataset))  # tracegen inspect
        assert report_body(summarize(after)) == report_body(summarize(dataset))  # read by row groups of 16 kB


def report_body(text: str) -> list[str]:
    """`tracegen inspect`'s text after its tables section (the counts, mixes and examples read from the rows)."""
    lines = text.splitlines()
    start = lines.index("tables:")
    return lines[lines.index("", start) :]


def table_counts(text: str) -> dict[str, str]:
    """{table: rows} from the tables section of `tracegen inspect`."""
    return {line.split()[0]: line.split()[1] for line in text.splitlines() if line.endswith("*.parquet")}


def test_the_loader_reads_a_compacted_packed_dataset_sample_for_sample(packed, tmp_path):
    after = compacted(packed, tmp_path)
    assert len(listed(after)["packed"]) < len(listed(packed)["packed"]) or len(listed(packed)["packed"]) == 1
    before, now = PackedLoader(packed, 4), PackedLoader(after, 4)
    assert len(now.shards) == len(before.shards)
    ids = np.arange(len(before.shards))
    assert np.array_equal(before.read(ids)["input_ids"], now.read(ids)["input_ids"])


def test_pack_resample_and_rederive_read_a_compacted_dataset(python_dataset, go_dataset, tmp_path):
    after = compacted(python_dataset, tmp_path / "python")
    packed_before = pack(python_dataset, str(tmp_path / "packed-before"), 512)
    packed_after = pack(after, str(tmp_path / "packed-after"), 512)
    docs = [read_manifest(*open_root(p))["stats"]["pack"]["in"] for p in (packed_before, packed_after)]
    assert docs[0] == docs[1]

    resampled = [str(tmp_path / f"resampled-{n}") for n in (0, 1)]
    for source, out in zip((python_dataset, after), resampled, strict=True):
        run_job(ResampleKind(), source, ResampleConfig(), out)
    first, second = ({r["trajectory_id"] for r in table_rows(out, "trajectories")} for out in resampled)
    assert first == second

    go_after = compacted(go_dataset, tmp_path / "go")
    rederived = [str(tmp_path / f"rederived-{n}") for n in (0, 1)]
    for source, out in zip((go_dataset, go_after), rederived, strict=True):
        run_job(RederiveKind(), source, RederiveConfig(), out)
    runs = [
        sorted((r["program_id"], r["run_index"], r["n_events"]) for r in table_rows(out, "go_runs"))
        for out in rederived
    ]
    assert runs[0] == runs[1] and runs[0]
    programs = [sorted(r["program_id"] for r in table_rows(out, "go_programs")) for out in rederived]
    assert programs[0] == programs[1]
