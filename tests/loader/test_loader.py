"""PackedLoader: one epoch reads every sample once, in a global order no topology changes, and resumes exactly."""

import json
import shutil

import numpy as np
import pytest
from loader_helpers import pack

from pipeline.loader import PackedLoader, ShardError

GLOBAL = 8


def stream(packed: str, *, world_size: int = 1, epoch: int = 0, seed: int = 0, **options) -> list[list[int]]:
    """The global stream of one epoch: per global batch, the sample ids of all ranks in rank order."""
    ranks = [
        PackedLoader(packed, GLOBAL, rank=r, world_size=world_size, seed=seed, epoch=epoch, **options)
        for r in range(world_size)
    ]
    return merged(ranks)


def merged(ranks: list) -> list[list[int]]:
    """Per global batch, the sample ids every rank's iterable gave for it, in rank order."""
    batches: dict[int, list[int]] = {}
    for rank in ranks:
        for micro in rank:
            batches.setdefault(int(micro["batch_index"]), []).extend(micro["sample_ids"].tolist())
    return [batches[b] for b in sorted(batches)]


def test_one_epoch_is_every_sample_exactly_once_and_ranks_are_disjoint(packed):
    total = len(PackedLoader(packed, GLOBAL).shards)
    ranks = [
        [i for micro in PackedLoader(packed, GLOBAL, rank=r, world_size=2) for i in micro["sample_ids"].tolist()]
        for r in range(2)
    ]
    assert sorted(ranks[0] + ranks[1]) == list(range(total))
    assert not set(ranks[0]) & set(ranks[1])


def test_the_stream_depends_on_seed_and_epoch_only(packed):
    first = stream(packed)
    assert stream(packed) == first
    assert stream(packed, seed=1) != first and stream(packed, epoch=1) != first
    assert sorted(sum(stream(packed, epoch=1), [])) == sorted(sum(first, []))
    assert stream(packed, world_size=2) == first == stream(packed, world_size=4, micro_batch_size=1)


def test_a_micro_batch_holds_the_tokens_masks_and_document_layout(packed):
    micro = next(iter(PackedLoader(packed, GLOBAL, micro_batch_size=4)))
    assert micro["input_ids"].shape == micro["loss_mask"].shape == micro["document_ids"].shape == (4, 512)
    assert micro["loss_mask"].dtype == bool and micro["input_ids"].dtype == np.int64
    documents, positions = micro["document_ids"], micro["position_ids"]
    assert not micro["loss_mask"][documents == -1].any()
    inside = documents[:, 1:] >= 0
    same = (documents[:, 1:] == documents[:, :-1]) & inside
    assert (positions[:, 1:][same] == positions[:, :-1][same] + 1).all()
    assert (positions[:, 1:][~same & inside] == 0).all() and (positions[:, 0] == 0).all()


def test_resuming_after_n_steps_continues_the_uninterrupted_stream_twice_in_a_row(packed):
    whole = [m["sample_ids"].tolist() for m in PackedLoader(packed, GLOBAL, seed=3, micro_batch_size=4)]
    loader = PackedLoader(packed, GLOBAL, seed=3, micro_batch_size=4)
    head = [m["sample_ids"].tolist() for m in _take(loader, 5)]  # 2.5 global batches: resume at batch 2
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["batches_consumed"] == 2
    second = PackedLoader(packed, GLOBAL, seed=3, micro_batch_size=4)
    second.load_state_dict(state)
    middle = [m["sample_ids"].tolist() for m in _take(second, 2)]
    third = PackedLoader(packed, GLOBAL, rank=0, world_size=1, seed=3, micro_batch_size=2)
    third.load_state_dict(second.state_dict())
    tail = [m["sample_ids"].tolist() for m in third]
    flat = sum(whole, [])
    assert sum(head[:4], []) + sum(middle, []) + sum(tail, []) == flat
    assert third.batches_consumed == third.batches_per_epoch()
    third.set_epoch(1)
    assert third.state_dict()["epoch"] == 1 and third.batches_consumed == 0


def _take(loader: PackedLoader, n: int) -> list[dict]:
    out = []
    for micro in loader:
        out.append(micro)
        if len(out) == n:
            break
    return out


def test_resuming_at_another_world_size_continues_the_same_global_stream(packed):
    first = PackedLoader(packed, GLOBAL, seed=5)
    _take(first, 3)
    state = first.state_dict()
    ranks = [PackedLoader(packed, GLOBAL, rank=rank, world_size=2, seed=5) for rank in range(2)]
    for loader in ranks:
        loader.load_state_dict(state)
    assert merged(ranks) == stream(packed, seed=5)[3:]


def test_a_changed_dataset_tokenizer_or_batch_size_is_refused_by_name(packed, python_dataset, tmp_path):
    state = PackedLoader(packed, GLOBAL).state_dict()
    with pytest.raises(ValueError, match="global_batch_size 8 -> 16"):
        PackedLoader(packed, 16).load_state_dict(state)
    with pytest.raises(ValueError, match="seed 0 -> 1"):
        PackedLoader(packed, GLOBAL, seed=1).load_state_dict(state)
    other = pack(python_dataset, str(tmp_path / "other"), 256)
    with pytest.raises(ValueError, match="dataset_fingerprint .*seq_len 512 -> 256"):
        PackedLoader(other, GLOBAL).load_state_dict(state)
    bpe = pack(python_dataset, str(tmp_path / "bpe"), 512, tokenizer="bpe", vocab_size=500)
    with pytest.raises(ValueError, match="tokenizer_fingerprint"):
        PackedLoader(bpe, GLOBAL).load_state_dict(state)


def test_a_missing_or_corrupt_shard_is_an_error_naming_it(packed, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(packed, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    shard = copy / manifest["tables"]["packed"]["shards"][-1]["path"]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(ShardError, match=str(shard)):
        PackedLoader(str(copy), GLOBAL)
    shard.unlink()
    with pytest.raises(ShardError, match=str(shard)):
        PackedLoader(str(copy), GLOBAL)


def test_mix_weights_leave_out_or_repeat_a_group(packed):
    loader = PackedLoader(packed, GLOBAL)
    groups = dict(zip(loader.shards.group_names, np.bincount(loader.shards.groups), strict=True))
    forward_only = PackedLoader(packed, GLOBAL, mix={"inverse": 0})
    read = [i for m in forward_only for i in m["sample_ids"].tolist()]
    assert len(read) == groups["function/forward"] == len(set(read))
    doubled = PackedLoader(packed, GLOBAL, mix={"inverse": 2, "forward": 0.5})
    read = [i for m in doubled for i in m["sample_ids"].tolist()]
    assert len(read) == 2 * groups["function/inverse"] + round(0.5 * groups["function/forward"])
    with pytest.raises(ValueError, match="mix"):
        PackedLoader(packed, GLOBAL, mix={"go": -1})


def test_bad_topologies_are_refused_up_front(packed):
    with pytest.raises(ValueError, match="divisible"):
        PackedLoader(packed, 6, world_size=4)
    with pytest.raises(ValueError, match="rank"):
        PackedLoader(packed, GLOBAL, rank=2, world_size=2)
    with pytest.raises(ValueError, match="micro_batch_size"):
        PackedLoader(packed, GLOBAL, micro_batch_size=3)
