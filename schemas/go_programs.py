"""The `go_programs` table: one row per Go program of a Go dataset, with its source text.

A run in `go_runs` names its program by `program_id` and `program_hash`; this row holds what was run, so
a training example (or another project's format, `tracegen export`) can show the program next to its
events without the program directory. `files` are the program's build inputs that are text: every `.go`
file below the program directory (sub-packages, `testdata` and `vendor` included, as the harness copies
them), its `go.mod` and `go.sum`, in path order. `program_hash` is the hex sha256 over, for each file in
that order, its posix path, a NUL byte, its bytes and a NUL byte; so equal hashes mean the same sources.
"""

import pyarrow as pa

from schemas.fields import field

VERSION = 1

TIMEOUT_SOURCES = ("default", "header", "manifest")

FILE = pa.struct(
    [
        field("path", pa.string(), "the file's path relative to the program directory (posix)", nullable=False),
        field(
            "text",
            pa.string(),
            "the file's text, UTF-8 (bytes that are not UTF-8, which the Go compiler rejects, are U+FFFD)",
            nullable=False,
        ),
    ]
)

SCHEMA = pa.schema(
    [
        field("program_id", pa.string(), "the program directory's path relative to --programs (posix)", nullable=False),
        field("program_hash", pa.string(), "hex sha256 over the files (see the table doc)", nullable=False),
        field(
            "mode",
            pa.string(),
            "main (a main package) | test (a package with func TestX(t *testing.T))",
            nullable=False,
        ),
        field(
            "module_path",
            pa.string(),
            "the module path of the program's go.mod ('prog' when it has none: the harness writes one); file "
            "names in go_runs events are relative to it",
            nullable=False,
        ),
        field(
            "files",
            pa.list_(pa.field("item", FILE, nullable=False)),
            "the source files, in path order",
            nullable=False,
        ),
        field("timeout_s", pa.float64(), "the per-run timeout every run of the program had, seconds", nullable=False),
        field(
            "timeout_source",
            pa.string(),
            "where that timeout came from: default (--timeout) | header (a `// tracegen: timeout=...` "
            "comment in the program) | manifest (an entry of --programs/tracegen.toml)",
            nullable=False,
        ),
    ]
)
