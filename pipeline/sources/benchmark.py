"""Benchmark items from JSONL in CruxEval's shape: `{"id", "code", "input", "output", "entry" = "f"}` per line.

What `tracegen evaluate --benchmark` scores and what `--decontaminate` cleans a corpus against. Each line is a
function record, read exactly as a corpus is (pipeline/sources/function_records.py), that also gives `output`,
the literal text of what `entry(<input>)` returns. A benchmark is a test set, not a corpus: a bad line stops the
command with an error naming the file, the line and the fix, since scoring or cleaning against part of a benchmark
would silently measure something else. The file's sha256 is what a dataset records it was cleaned against.
"""

import hashlib
from dataclasses import dataclass

from pipeline.sources.function_records import FunctionRecord, parse_records, read_file_bytes


@dataclass(frozen=True)
class Benchmark:
    path: str
    sha256: str
    items: tuple[FunctionRecord, ...]  # each with its `output`


def read_benchmark(path: str, option: str = "--benchmark") -> Benchmark:
    """The items of a benchmark file in file order; a ValueError names the first bad line and the fix."""
    data = read_file_bytes(path, "benchmark items", option)
    items, failures = parse_records(data, path)
    if failures:
        more = f" (and {len(failures) - 1} more bad lines)" if len(failures) > 1 else ""
        raise ValueError(f"benchmark {failures[0]['message']}{more}")
    for item in items:
        if item.output is None:
            raise ValueError(
                f"benchmark {item.input_ref}: item {item.id!r} has no text field 'output'; give each item the "
                f"literal of what {item.entry}({item.input}) returns, as a string"
            )
    if not items:
        raise ValueError(f"benchmark {path!r} holds no items; pass a JSONL file with one item per line to {option}")
    return Benchmark(path, hashlib.sha256(data).hexdigest(), tuple(items))
