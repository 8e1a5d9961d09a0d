"""`PackedLoader`: a packed dataset's samples as micro-batches, in a global order independent of the topology.

Each epoch is `epoch_order(seed, epoch)` (pipeline/loader/order.py) cut into global batches of
`global_batch_size` samples; rank r of `world_size` takes its contiguous slice of each, in micro-batches
of `micro_batch_size` (default: the whole slice). With `drop_last` the short last batch is skipped, else it
is read too (a rank's share of it may be short or empty). `batches_consumed` counts whole global batches:
it is advanced as the rank's last micro-batch of a batch is handed out, so a checkpoint taken after
training on it resumes at the next batch — at any world size with the same global batch size.

A micro-batch is a dict of numpy arrays (B = micro-batch size, L = seq_len, T = the most Go targets of a
sample in this micro-batch, at least 1; K = len(schemas.go_next_event.OUTCOMES)):
    input_ids     [B, L] int64   token ids (pad: the tokenizer's <|pad|>)
    loss_mask     [B, L] bool    where the loss is taken (the packing's mode: predicted states, or all)
    document_ids  [B, L] int32   index of the document a token belongs to in its sample; -1 on padding
    position_ids  [B, L] int32   position within that document (restart at each document: for
                                 intra-document attention, attend where document_ids are equal and causal)
    sample_ids    [B]    int64   the samples' global indices (PackedLoader.documents(i) says what is in one)
    go_positions  [B, T] int64   positions p of Go next-event tokens with a soft target; -1 pads
    go_counts     [B, T, K] int32  the empirical next-event counts at p (OUTCOMES order); 0 on pads
    go_n          [B, T] int32   the runs counted at p (the counts' sum); 0 on pads
    batch_index   []     int64   the global batch this micro-batch belongs to
    batch_done    []     bool    whether it is this rank's last micro-batch of that global batch
The Go objective: the token at p is one of `go_event_token_ids` (the outcome tokens, OUTCOMES order); the
model predicts it from the logits at p - 1, so KL(counts/n ‖ softmax(logits[p-1][go_event_token_ids])) is
the distribution-aware loss and cross-entropy on input_ids[p] (loss_mask is 1 there) the plain one.
"""

import numpy as np

from pipeline.format.go_tokens import OUTCOME_TOKENS
from pipeline.format.tokenizer import PackTokenizer
from pipeline.loader.order import batch_slice, epoch_order, group_weight, validate_mix
from pipeline.loader.shards import PackedShards
from schemas.go_next_event import OUTCOMES

STATE_FORMAT = "tracegen-loader/1"


class PackedLoader:
    """Iterate to get this rank's micro-batches from `batches_consumed` to the end of the epoch."""

    def __init__(
        self,
        packed: str,
        global_batch_size: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        epoch: int = 0,
        micro_batch_size: int | None = None,
        mix: dict[str, float] | None = None,
        drop_last: bool = False,
        cache_row_groups: int = 64,
    ):
        for name, value in (("global_batch_size", global_batch_size), ("world_size", world_size)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if type(rank) is not int or not 0 <= rank < world_size:
            raise ValueError(f"rank must be an int in 0..{world_size - 1}, got {rank!r}")
        if global_batch_size % world_size:
            raise ValueError(f"global_batch_size {global_batch_size} is not divisible by world_size {world_size}")
        share = global_batch_size // world_size
        micro = share if micro_batch_size is None else micro_batch_size
        if type(micro) is not int or micro < 1 or share % micro:
            raise ValueError(f"micro_batch_size must divide the per-rank batch {share}, got {micro_batch_size!r}")
        self.shards = PackedShards(packed, cache_row_groups)
        self.global_batch_size, self.rank, self.world_size = global_batch_size, rank, world_size
        self.seed, self.micro_batch_size, self.drop_last = seed, micro, drop_last
        self.mix = validate_mix(mix or {})
        self.weights = np.array([group_weight(g, self.mix) for g in self.shards.group_names])
        self.epoch, self.batches_consumed = epoch, 0
        self._order: tuple[int, np.ndarray] | None = None

    # -- the order -------------------------------------------------------------------------------------------
    def order(self, epoch: int) -> np.ndarray:
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, epoch_order(self.shards.groups, self.weights, self.seed, epoch))
        return self._order[1]

    def batches_per_epoch(self, epoch: int | None = None) -> int:
        total = len(self.order(self.epoch if epoch is None else epoch))
        whole, rest = divmod(total, self.global_batch_size)
        return whole + (1 if rest and not self.drop_last else 0)

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` from its first batch."""
        self.epoch, self.batches_consumed = epoch, 0

    # -- reading ---------------------------------------------------------------------------------------------
    def micro_batches(self, epoch: int, start: int, worker: int = 0, num_workers: int = 1):
        """This rank's micro-batches of `epoch` from global batch `start` on; worker k of K gets every K-th."""
        order = self.order(epoch)
        per_batch = self.global_batch_size // self.world_size // self.micro_batch_size
        for batch in range(start, self.batches_per_epoch(epoch)):
            first, stop = batch_slice(batch, self.global_batch_size, self.rank, self.world_size, len(order))
            chunks = range(first, stop, self.micro_batch_size)
            for j, at in enumerate(chunks):
                if ((batch - start) * per_batch + j) % num_workers != worker:
                    continue
                micro = self.read(order[at : min(at + self.micro_batch_size, stop)])
                micro["batch_index"] = np.array(batch, dtype=np.int64)
                micro["batch_done"] = np.array(j == len(chunks) - 1)
                yield micro

    def __iter__(self):
        epoch = self.epoch
        for micro in self.micro_batches(epoch, self.batches_consumed):
            if micro["batch_done"]:
                self.batches_consumed = int(micro["batch_index"]) + 1
            yield micro
        self.batches_consumed = self.batches_per_epoch(epoch)

    def read(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The samples at global `indices` as one micro-batch (see the module doc)."""
        n, length = len(indices), self.shards.seq_len
        input_ids = np.empty((n, length), dtype=np.int64)
        loss_mask = np.empty((n, length), dtype=bool)
        document_ids = np.full((n, length), -1, dtype=np.int32)
        position_ids = np.zeros((n, length), dtype=np.int32)
        targets = []
        for i, index in enumerate(indices):
            group, row = self.shards.locate(int(index))
            input_ids[i] = group.dense["input_ids"][row]
            loss_mask[i] = group.dense["loss_mask"][row]
            offsets, starts = group.ragged["doc_starts"]
            bounds = np.append(starts[offsets[row] : offsets[row + 1]], group.n_tokens[row])
            for d, (begin, end) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
                document_ids[i, begin:end] = d
                position_ids[i, begin:end] = np.arange(end - begin)
            offsets, positions = group.ragged["go_positions"]
            span = slice(offsets[row], offsets[row + 1])
            targets.append((positions[span], group.go_counts[span], group.ragged["go_n"][1][span]))
        width = max(1, max(len(positions) for positions, _, _ in targets))
        go_positions = np.full((n, width), -1, dtype=np.int64)
        go_counts = np.zeros((n, width, len(OUTCOMES)), dtype=np.int32)
        go_n = np.zeros((n, width), dtype=np.int32)
        for i, (positions, counts, runs) in enumerate(targets):
            go_positions[i, : len(positions)] = positions
            go_counts[i, : len(positions)] = counts
            go_n[i, : len(positions)] = runs
        return {
            "input_ids": input_ids,
            "loss_mask": loss_mask,
            "document_ids": document_ids,
            "position_ids": position_ids,
            "sample_ids": np.asarray(indices, dtype=np.int64),
            "go_positions": go_positions,
            "go_counts": go_counts,
            "go_n": go_n,
        }

    # -- resume ----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "format": STATE_FORMAT,
            "dataset_fingerprint": self.shards.fingerprint,
            "tokenizer_fingerprint": self.shards.tokenizer_fingerprint,
            "seq_len": self.shards.seq_len,
            "global_batch_size": self.global_batch_size,
            "seed": self.seed,
            "mix": dict(sorted(self.mix.items())),
            "drop_last": self.drop_last,
            "epoch": self.epoch,
            "batches_consumed": self.batches_consumed,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue where `state` left off; a ValueError names every setting that differs (the dataset, the
        tokenizer, seq_len, the global batch size, the seed, the mix): that stream cannot be continued."""
        mine = self.state_dict()
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a PackedLoader state ({state.get('format')!r}, expected {STATE_FORMAT!r})")
        fixed = (
            "dataset_fingerprint",
            "tokenizer_fingerprint",
            "seq_len",
            "global_batch_size",
            "seed",
            "mix",
            "drop_last",
        )
        changed = [f"{key} {state.get(key)!r} -> {mine[key]!r}" for key in fixed if state.get(key) != mine[key]]
        if changed:
            raise ValueError("cannot resume the loader: " + "; ".join(changed))
        self.epoch, self.batches_consumed = int(state["epoch"]), int(state["batches_consumed"])

    # -- what the samples are --------------------------------------------------------------------------------
    def tokenizer(self) -> PackTokenizer:
        return self.shards.tokenizer()

    def documents(self, sample_id: int) -> list[dict]:
        """The documents (source table, row id, start, offset) in the sample with global index `sample_id`."""
        return self.shards.documents(sample_id)

    def go_event_token_ids(self) -> np.ndarray:
        """The ids of the Go outcome tokens, in OUTCOMES order (the support of the soft targets)."""
        tokenizer = self.tokenizer()
        return np.array([tokenizer.special_ids[OUTCOME_TOKENS[name]] for name in OUTCOMES], dtype=np.int64)
