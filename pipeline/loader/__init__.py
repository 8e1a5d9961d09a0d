"""The streaming loader of packed datasets (docs/architecture.md §13): `PackedLoader`, its tokenizer, a torch wrapper.

    loader = PackedLoader("PACKED", global_batch_size=64, rank=r, world_size=w, seed=0)
    for micro in loader:                     # dicts of numpy arrays, see pipeline/loader/packed.py
        ...
    state = loader.state_dict()              # later: loader.load_state_dict(state) resumes the same stream
    tokenizer = load_tokenizer("PACKED")     # encode / decode / special_ids / fingerprint

`torch_batches(loader, num_workers=...)` (pipeline/loader/torch_data.py, imports torch) feeds it through a
torch DataLoader; `TorchPackedDataset` is the IterableDataset underneath.
"""

from pipeline.format.tokenizer import PackTokenizer
from pipeline.loader.packed import PackedLoader
from pipeline.loader.shards import PackedShards, ShardError


def load_tokenizer(packed: str) -> PackTokenizer:
    """The tokenizer saved beside the packed dataset `packed` (checked against its manifest)."""
    return PackedShards(packed).tokenizer()


def __getattr__(name: str):
    if name in ("TorchPackedDataset", "torch_batches"):
        from pipeline.loader import torch_data

        return getattr(torch_data, name)
    raise AttributeError(name)


__all__ = ["PackTokenizer", "PackedLoader", "ShardError", "load_tokenizer"]  # and, lazily, the torch wrapper
