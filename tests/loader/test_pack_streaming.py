"""Packing at scale: a large trajectories file is packed in pieces (units by row-group ranges) and a long Go run
through its window, each in bounded memory, and a re-run writes the same bytes.

Peak RSS is measured in a child process that runs the whole pack job itself, units one after another, without
Ray (tests/loader/pack_scale.py): the process tree is that one process, its peak RSS the figure. About 140 MB
of it is the imports (pyarrow, tokenizers, the pipeline). Before streaming (commit 3fc10f9) ~25 MB of
trajectories text in one file took 2.3 GB, and a Go run of only 1,000 events 2.0 GB (937 of its 1,001 examples
then dropped as longer than a sample); 5,000 events would take tens of GB."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pack_scale
import pytest

from pipeline.engine.reader import open_root, read_manifest, table_rows, table_shards
from pipeline.kinds.pack import PackConfig
from pipeline.loader import load_tokenizer

PEAK_RSS_MB = 450  # measured: ~330 MB for either input (the imports ~140 MB)
SEQ_LEN = 2048


def pack_measured(data: str, out: str, unit_mb: int = 256) -> dict:
    """Pack `data` into `out` in a child process; its summary line (peak RSS, units, stats)."""
    script = Path(__file__).with_name("pack_scale.py")
    done = subprocess.run(
        [sys.executable, str(script), data, out, str(SEQ_LEN), str(unit_mb)],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")])),
        },
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def packed_files(out: str) -> dict[str, str]:
    """{path: sha256 of the file's bytes} of the packed shards the manifest lists."""
    fs, root = open_root(out)
    manifest = read_manifest(fs, root)
    assert manifest is not None
    return {
        shard["path"]: hashlib.sha256(Path(out, shard["path"]).read_bytes()).hexdigest()
        for shard in table_shards(fs, root, manifest, "packed")
    }


def documents(out: str) -> dict[str, tuple[list[int], list[int]]]:
    """{doc_id: (its tokens, its loss mask)} over every sample, pieces joined in offset order."""
    pieces: dict[str, list] = {}
    for row in table_rows(out, "packed"):
        bounds = [*row["doc_starts"], row["n_tokens"]]
        for i, doc_id in enumerate(row["doc_ids"]):
            span = slice(bounds[i], bounds[i + 1])
            pieces.setdefault(doc_id, []).append(
                (row["doc_offsets"][i], row["input_ids"][span], row["loss_mask"][span])
            )
    joined = {}
    for doc_id, found in pieces.items():
        found.sort(key=lambda piece: piece[0])
        joined[doc_id] = ([t for _, ids, _ in found for t in ids], [m for _, _, mask in found for m in mask])
    return joined


@pytest.fixture(scope="module")
def trajectories(tmp_path_factory) -> str:
    """One compacted trajectories file: 30,000 trajectories (several to a sample), ~22 MB of text, row groups
    of ~1 MiB."""
    out = str(tmp_path_factory.mktemp("scale") / "trajectories")
    assert pack_scale.trajectories_dataset(out, 30_000, 4, 1 << 20) > 20_000_000
    return out


@pytest.fixture(scope="module")
def long_go(tmp_path_factory) -> str:
    """One Go program, two identical runs of 5,000 scheduler events: 5,001 exact rows, one per depth."""
    out = str(tmp_path_factory.mktemp("scale") / "go")
    pack_scale.long_go_dataset(out, 5_000)
    return out


def test_a_large_trajectories_file_packs_in_pieces_in_bounded_memory_to_the_same_documents(trajectories, tmp_path):
    pieces = pack_measured(trajectories, str(tmp_path / "pieces"), unit_mb=6)
    whole = pack_measured(trajectories, str(tmp_path / "whole"))
    assert pieces["units"] >= 3 and whole["units"] == 1
    assert pieces["peak_rss_mb"] < PEAK_RSS_MB and whole["peak_rss_mb"] < PEAK_RSS_MB, (pieces, whole)
    assert pieces["stats"]["pack"]["in"] == whole["stats"]["pack"]["in"] == 30_000
    # every document comes back whole, with the same tokens and mask; only where the pieces' samples begin and
    # end differs (each piece closes its groups' last samples): at most one more sample per group and piece
    assert documents(str(tmp_path / "pieces")) == documents(str(tmp_path / "whole"))
    extra = pieces["stats"]["pack"]["out"] - whole["stats"]["pack"]["out"]
    assert 0 <= extra <= 2 * pieces["units"]
    ids = [row["sample_id"] for row in table_rows(str(tmp_path / "pieces"), "packed")]
    assert len(ids) == len(set(ids)) and {i.split(":")[0] for i in ids} == {
        f"pack-trajectories-v-compact-00000~p{k}" for k in range(pieces["units"])
    }
    # a re-run writes the same bytes
    pack_measured(trajectories, str(tmp_path / "again"), unit_mb=6)
    assert packed_files(str(tmp_path / "again")) == packed_files(str(tmp_path / "pieces"))


def test_a_long_go_run_packs_every_depth_in_bounded_memory(long_go, tmp_path):
    first = pack_measured(long_go, str(tmp_path / "first"))
    assert first["peak_rss_mb"] < PEAK_RSS_MB, first
    assert first["stats"]["pack"]["in"] == 5_001 and first["stats"]["pack"]["dropped"] == {}
    tokenizer = load_tokenizer(str(tmp_path / "first"))
    found = 0
    for row in table_rows(str(tmp_path / "first"), "packed"):
        assert row["n_tokens"] <= SEQ_LEN and row["group"] == "go"
        found += len(row["doc_ids"])
        if "exact:4999:" in row["doc_ids"][0]:  # deep: a window, its table, and its events up to the end
            text = tokenizer.decode(row["input_ids"][: row["go_positions"][0]])
            assert "earlier events left out; goroutines: g1 " in text and text.endswith("<|go_next|>")
    assert found == 5_001
    again = pack_measured(long_go, str(tmp_path / "again"))
    assert again["stats"] == {
        **first["stats"],
        "pack": {**first["stats"]["pack"], "seconds": again["stats"]["pack"]["seconds"]},
    }
    assert packed_files(str(tmp_path / "again")) == packed_files(str(tmp_path / "first"))


def test_unit_mb_is_validated():
    with pytest.raises(ValueError, match="--unit-mb"):
        PackConfig(unit_mb=0)
    with pytest.raises(ValueError, match="--unit-mb"):
        PackConfig(unit_mb=1.5)  # type: ignore[arg-type]
