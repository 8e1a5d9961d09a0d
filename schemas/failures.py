"""The `failures` table: one row per input that could not be turned into output, with the cause."""

import pyarrow as pa

from schemas.fields import field

VERSION = 1

SCHEMA = pa.schema(
    [
        field(
            "unit_id",
            pa.string(),
            "the unit of work (chunk, repo@commit, program) the input belonged to",
            nullable=False,
        ),
        field("source_id", pa.string(), "the input record's id, when it has one"),
        field("stage", pa.string(), "read | setup | input | trace | parse | sandbox | ...", nullable=False),
        field(
            "error_type", pa.string(), "short machine-readable cause, e.g. SyntaxError, MissingField", nullable=False
        ),
        field("message", pa.string(), "what went wrong and how to fix it, naming the input", nullable=False),
        field("stderr_tail", pa.string(), "last lines of the sandboxed process's stderr, if any"),
        field("input_ref", pa.string(), "where the input came from, e.g. examples/functions.jsonl:12", nullable=False),
    ]
)
