"""The bundled examples' `traces` rows, pinned by a digest: a change to the tracer's output format, its
encoder or the host's parser that is meant to be invisible must leave every row as it was, byte for byte.

The rows come from the real stage in the bwrap sandbox. Left out: `python_version` (the machine's patch
release) and the records whose trace depends on the machine rather than on the tracer (listed below).
The digest is of the CPython minor version it was taken on; reprs and line events may differ on another.
"""

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from pipeline.sandbox import make_sandbox
from pipeline.sources.function_records import read_function_records
from pipeline.stages.trace_functions import TraceSettings, trace_functions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PINNED = {
    (3, 11): (115, "e121cc47560e5731cf92808bd72cf708dbb873bf05737668c4aadc9cc46b6378"),  # tracer 6
}
RUN_DEPENDENT = {
    "bad_fork_bomb": "how many forks succeed before the process limit depends on what else the machine runs",
}

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
    pytest.mark.skipif(sys.version_info[:2] not in PINNED, reason="no digest pinned for this CPython"),
]


def rows_digest(rows: list[dict]) -> tuple[int, str]:
    """(rows kept, sha256 of their canonical JSON in source_id order)."""
    kept = sorted((row for row in rows if row["source_id"] not in RUN_DEPENDENT), key=lambda row: row["source_id"])
    digest = hashlib.sha256()
    for row in kept:
        pinned = {name: value for name, value in row.items() if name != "python_version"}
        digest.update(json.dumps(pinned, sort_keys=True).encode() + b"\n")
    return len(kept), digest.hexdigest()


def test_the_examples_traces_rows_are_unchanged():
    records, failures = read_function_records(str(EXAMPLES / "functions.jsonl"))
    assert failures == []
    output = trace_functions(
        records, make_sandbox("bwrap"), TraceSettings(max_seconds=1.0, record_timeout_s=3.0), "pin"
    )
    assert rows_digest(output.rows("traces")) == PINNED[sys.version_info[:2]]
