"""The `duplicates` table: one row per input dropped before tracing as a near-duplicate of a kept one."""

import pyarrow as pa

from schemas.fields import field

VERSION = 1

SCHEMA = pa.schema(
    [
        field("unit_id", pa.string(), "the unit that recorded the drop", nullable=False),
        field("source_id", pa.string(), "the dropped record's id", nullable=False),
        field(
            "duplicate_of",
            pa.string(),
            "id of the kept record it duplicates (the first of its group in input order)",
            nullable=False,
        ),
        field(
            "similarity",
            pa.float64(),
            "estimated Jaccard similarity of their MinHash signatures "
            "(pipeline/stages/dedup.py documents the normalisation and shingling)",
            nullable=False,
        ),
        field(
            "input_ref",
            pa.string(),
            "where the dropped record came from, e.g. examples/functions.jsonl:12",
            nullable=False,
        ),
    ]
)
