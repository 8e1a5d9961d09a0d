"""Documents → fixed-length packed samples (schemas/packed.py), streamed: memory is one batch of documents.

A `Packer` takes documents in order (`add`), tokenizes them a batch at a time (`BATCH_DOCUMENTS` documents or
`BATCH_CHARS` characters, whichever comes first: one `encode_batch` each) and keeps one open sample per mix
group. A document is appended to its group's open sample while it fits. One that does not fit in what is left
but fits in a sample starts a new one (short documents are never cut); a longer one starts a new sample too and
continues in the next ones span by span, so it is cut only between spans — never inside a state
(pipeline/format/documents.py). A document marked unsplittable (a Go example) that is longer than a
sample, and any document with a span longer than a sample, is dropped and counted. Samples are padded with
`<|pad|>` (loss 0, outside every document). Each sample holds documents of one mix group only, so the loader
can weight groups by whole samples.

Finished samples go to `write` as they fill (`WRITE_ROWS` at a time); `finish` closes the open samples, group
by group in sorted order. A group's samples are numbered in document order (`sample_id` =
`UNIT_ID:GROUP:N`); samples of different groups interleave in the output in the order they filled — the same
order on every run, so a unit's shards are byte-identical across re-runs.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from pipeline.format.documents import Document
from pipeline.format.tokenizer import PackTokenizer

LOSS_MODES = ("states", "all")
BATCH_DOCUMENTS = 256
BATCH_CHARS = 1 << 18
WRITE_ROWS = 64


@dataclass(frozen=True)
class PackSettings:
    """seq_len: tokens per sample; loss: `states` (only the predicted states' tokens, the default) | `all`."""

    seq_len: int = 2048
    loss: str = "states"

    def __post_init__(self):
        if type(self.seq_len) is not int or not 16 <= self.seq_len <= 1 << 20:
            raise ValueError(f"--seq-len must be an int in 16..1048576, got {self.seq_len!r}")
        if self.loss not in LOSS_MODES:
            raise ValueError(f"--loss must be one of {', '.join(LOSS_MODES)}, got {self.loss!r}")


@dataclass
class _Sample:
    """The sample being filled."""

    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    doc_starts: list[int] = field(default_factory=list)
    doc_offsets: list[int] = field(default_factory=list)
    doc_tables: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    go_positions: list[int] = field(default_factory=list)
    go_counts: list[list[int]] = field(default_factory=list)
    go_n: list[int] = field(default_factory=list)


@dataclass
class _Group:
    """A mix group's open sample and how many of its samples are done."""

    sample: _Sample = field(default_factory=_Sample)
    done: int = 0


class Packer:
    """Documents in (`add`, then `finish` once), finished sample rows out to `write(rows)`; `n_in` documents
    taken, `n_out` samples written, `dropped` documents by reason."""

    def __init__(
        self, tokenizer: PackTokenizer, settings: PackSettings, unit_id: str, write: Callable[[list[dict]], None]
    ):
        self.tokenizer, self.settings, self.unit_id, self.write = tokenizer, settings, unit_id, write
        self.n_in = self.n_out = 0
        self.dropped: Counter = Counter()
        self._groups: dict[str, _Group] = {}
        self._batch: list[Document] = []
        self._batch_chars = 0
        self._rows: list[dict] = []

    def add(self, document: Document) -> None:
        self.n_in += 1
        self._batch.append(document)
        self._batch_chars += sum(len(span.text) for span in document.spans)
        if len(self._batch) >= BATCH_DOCUMENTS or self._batch_chars >= BATCH_CHARS:
            self._pack_batch()

    def add_all(self, documents: Iterable[Document]) -> "Packer":
        for document in documents:
            self.add(document)
        return self

    def finish(self) -> None:
        """Pack what is left, close every group's open sample (groups in sorted order), write the rest."""
        self._pack_batch()
        for name in sorted(self._groups):
            self._close(name)
        self._write()

    def _pack_batch(self) -> None:
        batch, self._batch, self._batch_chars = self._batch, [], 0
        encoded = iter(self.tokenizer.encode_batch([span.text for document in batch for span in document.spans]))
        seq_len = self.settings.seq_len
        for document in batch:
            spans = [next(encoded) for _ in document.spans]
            if max(map(len, spans)) > seq_len:
                self.dropped["span_longer_than_seq_len"] += 1
            elif not document.splittable and sum(map(len, spans)) > seq_len:
                self.dropped["example_longer_than_seq_len"] += 1
            else:
                self._place(document, spans)
            if len(self._rows) >= WRITE_ROWS:
                self._write()

    def _write(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self.n_out += len(rows)
            self.write(rows)

    def _close(self, name: str) -> None:
        group = self._groups[name]
        sample = group.sample
        if not sample.ids:
            return
        n_tokens = len(sample.ids)
        padding = self.settings.seq_len - n_tokens
        self._rows.append(
            {
                "sample_id": f"{self.unit_id}:{name}:{group.done}",
                "group": name,
                "n_tokens": n_tokens,
                "input_ids": sample.ids + [self.tokenizer.pad_id] * padding,
                "loss_mask": sample.mask + [0] * padding,
                "doc_starts": sample.doc_starts,
                "doc_offsets": sample.doc_offsets,
                "doc_tables": sample.doc_tables,
                "doc_ids": sample.doc_ids,
                "go_positions": sample.go_positions,
                "go_counts": sample.go_counts,
                "go_n": sample.go_n,
            }
        )
        group.sample = _Sample()
        group.done += 1

    def _place(self, document: Document, spans: Sequence[list[int]]) -> None:
        name = document.group
        group = self._groups.setdefault(name, _Group())
        seq_len, all_tokens = self.settings.seq_len, self.settings.loss == "all"
        if sum(map(len, spans)) > seq_len - len(group.sample.ids):
            self._close(name)
        offset, opened = 0, False
        for span, ids in zip(document.spans, spans, strict=True):
            if len(ids) > seq_len - len(group.sample.ids):
                self._close(name)
                opened = False
            sample = group.sample
            if not opened:
                sample.doc_starts.append(len(sample.ids))
                sample.doc_offsets.append(offset)
                sample.doc_tables.append(document.table)
                sample.doc_ids.append(document.doc_id)
                opened = True
            if span.target is not None and ids:
                counts, n = span.target
                sample.go_positions.append(len(sample.ids))
                sample.go_counts.append(list(counts))
                sample.go_n.append(n)
            sample.ids.extend(ids)
            sample.mask.extend([int(span.predicted or all_tokens)] * len(ids))
            offset += len(ids)
