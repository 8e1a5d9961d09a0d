"""The `packed` table: fixed-length training samples made by `tracegen pack` (pipeline/kinds/pack.py).

Every sample holds `seq_len` tokens of the tokenizer saved beside the dataset (`tokenizer.json`, its
sha256 in the manifest's `files`): whole documents (trajectories, Go examples) back to back, a document
longer than a sample cut between spans — never inside a state — then `<|pad|>` to the end. Documents of
one mix group only (`group`). Document i of a sample spans positions `doc_starts[i]` up to the next start
(or `n_tokens`); decoding those tokens gives the document's text from its token `doc_offsets[i]` on.
Row groups are small (`ROW_GROUP_BYTES`): the loader reads samples in a global random order.
"""

import pyarrow as pa

from schemas.fields import field

VERSION = 1
ROW_GROUP_BYTES = 256 << 10


def _list(item: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("item", item, nullable=False))


SCHEMA = pa.schema(
    [
        field("sample_id", pa.string(), "UNIT_ID:GROUP:INDEX, unique in the dataset", nullable=False),
        field(
            "group",
            pa.string(),
            "mix group: function/forward | function/inverse | repo/forward | repo/inverse | unknown/... "
            "(a trajectory whose trace the dataset does not hold) | go",
            nullable=False,
        ),
        field("n_tokens", pa.int32(), "tokens before the padding", nullable=False),
        field("input_ids", _list(pa.int32()), "seq_len token ids, padded with <|pad|>", nullable=False),
        field(
            "loss_mask",
            _list(pa.int8()),
            "seq_len flags: 1 where the loss is taken (mode `states`: the tokens of every state an action "
            "leads to and of every Go next-event token; mode `all`: every non-pad token)",
            nullable=False,
        ),
        field("doc_starts", _list(pa.int32()), "position where each document (piece) begins", nullable=False),
        field(
            "doc_offsets",
            _list(pa.int32()),
            "each piece's first token's index in its whole document (0 unless the document was cut)",
            nullable=False,
        ),
        field(
            "doc_tables", _list(pa.string()), "each piece's source table: trajectories | go_next_event", nullable=False
        ),
        field(
            "doc_ids",
            _list(pa.string()),
            "each piece's source row: trajectory_id, or PROGRAM_ID:exact:DEPTH:PREFIX_HASH of a go_next_event row",
            nullable=False,
        ),
        field(
            "go_positions",
            _list(pa.int32()),
            "positions of the Go next-event tokens carrying a soft target (pipeline/format/go_examples.py)",
            nullable=False,
        ),
        field(
            "go_counts",
            _list(_list(pa.int32())),
            "per Go position: the go_next_event counts in schemas.go_next_event.OUTCOMES order",
            nullable=False,
        ),
        field("go_n", _list(pa.int32()), "per Go position: the runs counted (n)", nullable=False),
    ]
)
