"""Benchmark: the trace stage on one chunk of 16 small bundled records under bwrap, for the tree at TREE.

    .venv/bin/python bench/chunk.py TREE ROUNDS      (TREE: this checkout, or an exported older commit)

Runs `pipeline.stages.trace_functions.trace_functions` ROUNDS times and prints the best: sandbox start, the
runner, every record's fork, trace and cleanup, and the host's parse. Alternate two trees for a side-by-side.
"""

import sys
import time

sys.path.insert(0, sys.argv[1])
from pipeline.sandbox import make_sandbox  # noqa: E402
from pipeline.sources.function_records import read_function_records  # noqa: E402
from pipeline.stages.trace_functions import TraceSettings, trace_functions  # noqa: E402

records, _ = read_function_records(sys.argv[1] + "/examples/functions.jsonl")
records = [r for r in records if not r.id.startswith("bad_")][:16]
sandbox = make_sandbox("bwrap")
best = 1e9
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    out = trace_functions(records, sandbox, TraceSettings(), "bench")
    best = min(best, time.perf_counter() - start)
print(f"{sys.argv[1]}: {best * 1000:.1f} ms for {len(records)} records, {len(out.tables['traces'])} traces")
