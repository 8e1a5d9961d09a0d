"""The `contaminated` table: one row per record, trace, trajectory or Go program dropped because its code (or, for a
traced call, its input and return value) matches an item of a benchmark file given to `--decontaminate`
(pipeline/stages/decontaminate.py documents the rules)."""

import pyarrow as pa

from schemas.fields import field

VERSION = 2  # 2: `table` may be go_programs, and traces for function records (the io rule after tracing)

SCHEMA = pa.schema(
    [
        field("unit_id", pa.string(), "the unit that recorded the drop", nullable=False),
        field(
            "table",
            pa.string(),
            "what was dropped: function_records (a record, before tracing) | traces (a repository trace, or a "
            "function record's trace whose call returned an item's output for its input, with the trajectories it "
            "would have given) | trajectories (a trajectory left out of `pack`) | go_programs (a Go program whose "
            "examples and trajectories `pack` left out)",
            nullable=False,
        ),
        field(
            "dropped_id",
            pa.string(),
            "the dropped record's id, trace_id, trajectory_id or program_id",
            nullable=False,
        ),
        field(
            "source_id",
            pa.string(),
            "the source it came from: the record's id, repo@commit:path:qualname, or the Go program_id",
        ),
        field("benchmark", pa.string(), "path of the benchmark file it matched, as given", nullable=False),
        field("benchmark_sha256", pa.string(), "sha256 of that file's content (hex)", nullable=False),
        field("item_id", pa.string(), "id of the benchmark item it matched", nullable=False),
        field(
            "rule",
            pa.string(),
            "minhash (estimated Jaccard similarity of the dedup's normalised shingles at or above the threshold) | "
            "ngram (a shared run of 13 normalised tokens holding 3 content tokens; for Go, of 13 tokens as "
            "written) | io (a call with the item's input returns its output: a record's `output`, or a trace's "
            "return value)",
            nullable=False,
        ),
        field(
            "score",
            pa.float64(),
            "minhash: the estimated similarity; ngram: the share of the item's 13-token runs the code holds; io: 1.0",
            nullable=False,
        ),
    ]
)
