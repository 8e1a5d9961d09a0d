"""The torch wrapper: 0 or 2 DataLoader workers, persistent or not, give the loader's own stream and resume point."""

import pytest

from pipeline.loader import PackedLoader

torch = pytest.importorskip("torch")


def ids(batches) -> list[list[int]]:
    return [micro["sample_ids"].tolist() for micro in batches]


def test_0_or_2_workers_give_the_same_stream_as_the_loader(packed):
    from pipeline.loader import torch_batches

    expected = ids(PackedLoader(packed, 8, micro_batch_size=2, seed=4))
    for workers in (0, 2):
        batches = list(torch_batches(PackedLoader(packed, 8, micro_batch_size=2, seed=4), num_workers=workers))
        assert isinstance(batches[0]["input_ids"], torch.Tensor) and batches[0]["input_ids"].shape == (2, 512)
        assert ids(batches) == expected


def test_persistent_workers_follow_set_epoch_and_load_state_dict(packed):
    from pipeline.loader import torch_batches

    loader = PackedLoader(packed, 8, micro_batch_size=4, seed=2)
    batches = torch_batches(loader, num_workers=2, persistent_workers=True)
    assert ids(batches) == ids(PackedLoader(packed, 8, micro_batch_size=4, seed=2))
    loader.set_epoch(1)
    head = []
    for micro in batches:  # stop after 3 global batches (6 micro-batches)
        head.append(micro["sample_ids"].tolist())
        if len(head) == 6:
            break
    state = loader.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (1, 3)
    loader.load_state_dict(state)
    tail = ids(batches)
    assert head + tail == ids(PackedLoader(packed, 8, micro_batch_size=4, seed=2, epoch=1))
