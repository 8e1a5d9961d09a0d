"""The `go_traces` table: each Go run's raw runtime/trace file, zstd-compressed, one row per stored trace.

Kept so that `go_runs` events can be re-derived with a newer mapping without re-running the program
(`tracegen rederive-go`, pipeline/stages/go/rederive.py). A trace larger than `max_trace_bytes` is not stored (its
`go_runs` row says `trace_stored = false`). Re-parse with:
`go_harness parse -trace FILE -mode MODE -file-prefix FILE_PREFIX -max-events MAX_EVENTS`.
"""

import pyarrow as pa

from schemas.fields import field

VERSION = 1

SCHEMA = pa.schema(
    [
        field("program_id", pa.string(), "the go_runs program_id", nullable=False),
        field("run_index", pa.int32(), "the go_runs run_index", nullable=False),
        field(
            "mode", pa.string(), "main | test: which goroutines are the program's roots when re-parsing", nullable=False
        ),
        field(
            "file_prefix",
            pa.string(),
            "prefix stripped from file names when parsing (the module path + '/')",
            nullable=False,
        ),
        field("max_events", pa.int32(), "the event cap the run was parsed with", nullable=False),
        field("harness_version", pa.string(), "hash of the go_harness sources that parsed it", nullable=False),
        field("trace_bytes", pa.int64(), "size of the raw trace", nullable=False),
        field("trace_sha256", pa.string(), "sha256 of the raw trace (hex)", nullable=False),
        field(
            "trace_zstd",
            pa.large_binary(),
            "the raw trace, one zstd frame (the `zstandard` package: zstandard.decompress(value))",
            nullable=False,
        ),
    ]
)
