"""Random access to a packed dataset's samples, read through its manifest (never a directory listing).

A sample's global index is its position in manifest order (shard by shard, row by row); the manifest's
row counts give each shard's first index, so index → (shard, row) is one binary search and row → row group
another (from the shard's footer). Row groups are small (schemas/packed.py) and the last ones decoded are
kept, per process, in a small LRU cache. Every shard's footer is read when the dataset is opened: a shard
that is missing, unreadable or whose row count differs from the manifest's is a `ShardError` naming it;
so is one whose row group fails to decode later.
"""

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.engine.reader import find_dataset, open_root, read_text, shard_file
from pipeline.format.tokenizer import TOKENIZER_FILE, PackTokenizer
from schemas.go_next_event import OUTCOMES

_DENSE = ("input_ids", "loss_mask")
_RAGGED = ("doc_starts", "go_positions", "go_n")
_READ = [*_DENSE, *_RAGGED, "go_counts", "n_tokens"]


class ShardError(RuntimeError):
    """A shard the manifest lists is missing or corrupt; the message names it."""


@dataclass
class RowGroup:
    """One decoded row group: dense [rows, seq_len] columns, ragged columns as (offsets, values)."""

    dense: dict[str, np.ndarray]
    ragged: dict[str, tuple[np.ndarray, np.ndarray]]
    go_counts: np.ndarray  # [targets in the group, outcomes], aligned with ragged["go_positions"] values
    n_tokens: np.ndarray


def _ragged(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    array = column.combine_chunks()
    offsets = array.offsets.to_numpy()
    return offsets - offsets[0], array.flatten().to_numpy()


class PackedShards:
    """The packed dataset at `uri`: its sample count, groups, fingerprints, tokenizer, and `row(index)`."""

    def __init__(self, uri: str, cache_row_groups: int = 64):
        dataset = find_dataset(uri)
        if dataset is None or dataset.manifest.get("kind") != "pack":
            raise ValueError(f"{uri!r} holds no packed dataset (a manifest.json of kind pack); run tracegen pack")
        self.uri, self.root, manifest = dataset.uri, dataset.root, dataset.manifest
        self.seq_len = int(manifest["config"]["packing"]["seq_len"])
        self.tokenizer_fingerprint = manifest.get("files", {}).get(TOKENIZER_FILE, "")
        listed_shards = dataset.shards("packed")
        self.shards = [shard["path"] for shard in listed_shards]
        rows = [int(shard["rows"]) for shard in listed_shards]
        self.starts = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)])
        listed = [[s["path"], s["sha256"], s["rows"]] for s in listed_shards]
        self.fingerprint = hashlib.sha256(json.dumps([manifest["config_hash"], listed]).encode()).hexdigest()
        self.cache_row_groups = cache_row_groups
        self._files: dict[int, pq.ParquetFile] = {}
        self._cache: OrderedDict[tuple[int, int], RowGroup] = OrderedDict()
        group_rows: list[np.ndarray] = []
        groups: list[pa.ChunkedArray] = []
        for index, expected in enumerate(rows):
            file = self._file(index)
            if file.metadata.num_rows != expected:
                raise ShardError(
                    f"packed shard {self._path(index)} holds {file.metadata.num_rows} rows, the manifest says "
                    f"{expected}: the shard is corrupt or was replaced; re-run tracegen pack"
                )
            sizes = [file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)]
            group_rows.append(np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))
            groups.append(self._guarded(index, lambda f=file: f.read(columns=["group"]).column("group")))
        self._row_group_starts = group_rows
        names = sorted({name for column in groups for name in column.to_pylist()})
        self.group_names: tuple[str, ...] = tuple(names)
        codes = {name: code for code, name in enumerate(names)}
        self.groups = np.array([codes[name] for column in groups for name in column.to_pylist()], dtype=np.int32)
        self._files.clear()  # reopened lazily where rows are read (each DataLoader worker its own)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_files"], state["_cache"] = {}, OrderedDict()
        return state

    def _path(self, shard: int) -> str:
        return shard_file(self.root, self.shards[shard])

    def _guarded(self, shard: int, read):
        try:
            return read()
        except (OSError, pa.ArrowException) as error:
            raise ShardError(
                f"packed shard {self._path(shard)} is missing or corrupt ({error}); re-run tracegen pack"
            ) from error

    def _file(self, shard: int) -> pq.ParquetFile:
        if shard not in self._files:
            fs, _ = open_root(self.uri)
            self._files[shard] = self._guarded(shard, lambda: pq.ParquetFile(fs.open_input_file(self._path(shard))))
        return self._files[shard]

    def _row_group(self, shard: int, group: int) -> RowGroup:
        key = (shard, group)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        table = self._guarded(shard, lambda: self._file(shard).read_row_group(group, columns=_READ))
        dense = {}
        for name in _DENSE:
            values = table.column(name).combine_chunks().flatten().to_numpy()
            dense[name] = values.reshape(table.num_rows, self.seq_len)
        counts = table.column("go_counts").combine_chunks().flatten().flatten().to_numpy()
        decoded = RowGroup(
            dense,
            {name: _ragged(table.column(name)) for name in _RAGGED},
            counts.reshape(-1, len(OUTCOMES)),
            table.column("n_tokens").to_numpy(),
        )
        self._cache[key] = decoded
        if len(self._cache) > self.cache_row_groups:
            self._cache.popitem(last=False)
        return decoded

    def go_target_types(self) -> np.ndarray:
        """How many of the data's Go soft targets have each outcome (OUTCOMES order) as their most frequent one
        (ties to the first, as pack writes the token): what `pretrain --go-balance` weighs by. Reads the
        go_counts column alone, a row group at a time."""
        totals = np.zeros(len(OUTCOMES), dtype=np.int64)
        for shard in range(len(self.shards)):
            file = self._file(shard)
            for group in range(file.metadata.num_row_groups):
                table = self._guarded(shard, lambda f=file, g=group: f.read_row_group(g, columns=["go_counts"]))
                counts = table.column("go_counts").combine_chunks().flatten().flatten().to_numpy()
                totals += np.bincount(counts.reshape(-1, len(OUTCOMES)).argmax(axis=1), minlength=len(OUTCOMES))
        return totals

    def locate(self, index: int) -> tuple[RowGroup, int]:
        """The decoded row group holding sample `index` and the sample's row in it."""
        shard = int(np.searchsorted(self.starts, index, side="right")) - 1
        row = index - int(self.starts[shard])
        starts = self._row_group_starts[shard]
        group = int(np.searchsorted(starts, row, side="right")) - 1
        return self._row_group(shard, group), row - int(starts[group])

    def documents(self, index: int) -> list[dict]:
        """What sample `index` holds: per document piece its table, id, start in the sample and offset in
        the document (uncached: for logs and inspection, not for training)."""
        shard = int(np.searchsorted(self.starts, index, side="right")) - 1
        row = index - int(self.starts[shard])
        columns = ["doc_tables", "doc_ids", "doc_starts", "doc_offsets"]
        table = self._guarded(shard, lambda: self._file(shard).read(columns=columns).slice(row, 1))
        found = table.to_pylist()[0]
        return [
            {"table": t, "doc_id": d, "start": s, "offset": o}
            for t, d, s, o in zip(*(found[c] for c in columns), strict=True)
        ]

    def tokenizer(self) -> PackTokenizer:
        """The tokenizer saved beside the dataset; a ValueError when it is missing or not the one packed with."""
        fs, _ = open_root(self.uri)
        text = read_text(fs, f"{self.root}/{TOKENIZER_FILE}")
        if text is None:
            raise ValueError(f"{self.uri!r} has no {TOKENIZER_FILE} beside its manifest; re-run tracegen pack")
        tokenizer = PackTokenizer(text)
        if tokenizer.fingerprint != self.tokenizer_fingerprint:
            raise ValueError(
                f"{self.uri}/{TOKENIZER_FILE} is not the tokenizer the manifest lists; re-run tracegen pack"
            )
        return tokenizer
