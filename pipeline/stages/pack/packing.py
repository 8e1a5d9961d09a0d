"""Documents → fixed-length packed samples (schemas/packed.py), one mix group at a time.

Documents are taken in order and appended to the open sample while they fit. A document that does not fit
in what is left but fits in a sample starts a new one (short documents are never cut); a longer one starts
a new sample too and continues in the next ones span by span, so it is cut only between spans — never
inside a state (pipeline/stages/pack/documents.py). A document marked unsplittable (a Go example) that is longer
than a sample, and any document with a span longer than a sample, is dropped and counted. Samples are
padded with `<|pad|>` (loss 0, outside every document). Each sample holds documents of one mix group
only, so the loader can weight groups by whole samples.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.loader.tokenizer import PackTokenizer
from pipeline.stages.pack.documents import Document

LOSS_MODES = ("states", "all")


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


class _Packer:
    def __init__(self, tokenizer: PackTokenizer, settings: PackSettings, unit_id: str, group: str):
        self.pad, self.settings, self.unit_id, self.group = tokenizer.pad_id, settings, unit_id, group
        self.rows: list[dict] = []
        self.sample = _Sample()

    @property
    def room(self) -> int:
        return self.settings.seq_len - len(self.sample.ids)

    def flush(self) -> None:
        sample = self.sample
        if not sample.ids:
            return
        n_tokens, padding = len(sample.ids), self.room
        self.rows.append(
            {
                "sample_id": f"{self.unit_id}:{self.group}:{len(self.rows)}",
                "group": self.group,
                "n_tokens": n_tokens,
                "input_ids": sample.ids + [self.pad] * padding,
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
        self.sample = _Sample()

    def add(self, document: Document, spans: Sequence[list[int]]) -> None:
        if sum(map(len, spans)) > self.room:
            self.flush()
        offset, opened = 0, False
        for span, ids in zip(document.spans, spans, strict=True):
            if len(ids) > self.room:
                self.flush()
                opened = False
            sample = self.sample
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
            sample.mask.extend([int(span.predicted or self.settings.loss == "all")] * len(ids))
            offset += len(ids)


def pack_documents(
    documents: Sequence[Document], tokenizer: PackTokenizer, settings: PackSettings, unit_id: str
) -> tuple[list[dict], Counter]:
    """(packed rows, dropped documents by reason); rows grouped by mix group (sorted), in document order
    within a group."""
    encoded = iter(tokenizer.encode_batch([span.text for document in documents for span in document.spans]))
    by_group: dict[str, list[tuple[Document, list[list[int]]]]] = {}
    dropped: Counter = Counter()
    for document in documents:
        spans = [next(encoded) for _ in document.spans]
        if max(map(len, spans)) > settings.seq_len:
            dropped["span_longer_than_seq_len"] += 1
        elif not document.splittable and sum(map(len, spans)) > settings.seq_len:
            dropped["example_longer_than_seq_len"] += 1
        else:
            by_group.setdefault(document.group, []).append((document, spans))
    rows = []
    for group in sorted(by_group):
        packer = _Packer(tokenizer, settings, unit_id, group)
        for document, spans in by_group[group]:
            packer.add(document, spans)
        packer.flush()
        rows.extend(packer.rows)
    return rows, dropped
