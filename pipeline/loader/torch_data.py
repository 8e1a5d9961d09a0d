"""The loader through a torch DataLoader: `TorchPackedDataset` (an IterableDataset) and `torch_batches`.

Worker k of K yields every K-th micro-batch of this rank (`PackedLoader.micro_batches`), and the
DataLoader takes one from each worker in turn, so the stream is the same with 0 or any number of workers.
Where to start (epoch, global batch) lives in shared memory the main process sets before each iteration,
so persistent workers — whose dataset copies outlive an iteration — start where the loader is, after a
`set_epoch` or a `load_state_dict` too. Importing this module imports torch; nothing else in
`pipeline.loader` does.
"""

import multiprocessing

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from pipeline.loader.packed import PackedLoader


class TorchPackedDataset(IterableDataset):
    """This rank's micro-batches (dicts of numpy arrays; the DataLoader makes them tensors)."""

    def __init__(self, loader: PackedLoader):
        self.loader = loader
        self.epoch = multiprocessing.RawValue("q", loader.epoch)
        self.start = multiprocessing.RawValue("q", loader.batches_consumed)

    def sync(self) -> None:
        """Start the next iteration where the loader is now."""
        self.epoch.value, self.start.value = self.loader.epoch, self.loader.batches_consumed

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        yield from self.loader.micro_batches(self.epoch.value, self.start.value, worker, workers)


class TorchBatches:
    """Iterate for this rank's micro-batches as dicts of tensors; the loader's `batches_consumed` advances as
    iterating the loader itself does, so `loader.state_dict()` is the resume point."""

    def __init__(self, loader: PackedLoader, **data_loader_options):
        self.loader = loader
        self.dataset = TorchPackedDataset(loader)
        self.data_loader = DataLoader(self.dataset, batch_size=None, **data_loader_options)

    def __iter__(self):
        loader, epoch = self.loader, self.loader.epoch
        self.dataset.sync()
        for micro in self.data_loader:
            if micro["batch_done"]:
                loader.batches_consumed = int(micro["batch_index"]) + 1
            yield micro
        loader.batches_consumed = loader.batches_per_epoch(epoch)


def torch_batches(
    loader: PackedLoader, *, num_workers: int = 0, persistent_workers: bool = False, pin_memory: bool = False
) -> TorchBatches:
    """`loader` through a DataLoader with `num_workers` worker processes (0: in this process)."""
    return TorchBatches(
        loader,
        num_workers=num_workers,
        persistent_workers=persistent_workers and num_workers > 0,
        pin_memory=pin_memory,
    )
