"""Benchmark files (pipeline/sources/benchmark.py): items in file order with their outputs and the file's digest;
any bad line stops the read with the file, the line and the fix."""

import hashlib
import json

import pytest

from pipeline.sources.benchmark import read_benchmark
from pipeline.sources.function_records import read_function_records

ITEMS = [
    {"id": "b0", "code": "def f(x):\n    return x + 1\n", "input": "1", "output": "2"},
    {"id": "b1", "code": "def g(s):\n    return s[::-1]\n", "input": "'ab'", "output": "'ba'", "entry": "g"},
]


def write(tmp_path, lines) -> str:
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_items_keep_their_outputs_entries_and_the_files_digest(tmp_path):
    path = write(tmp_path, ITEMS)
    benchmark = read_benchmark(path)
    assert [(i.id, i.entry, i.input, i.output) for i in benchmark.items] == [
        ("b0", "f", "1", "2"),
        ("b1", "g", "'ab'", "'ba'"),
    ]
    assert benchmark.sha256 == hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_a_corpus_line_with_an_output_of_another_type_still_reads_as_a_record(tmp_path):
    path = write(tmp_path, [{**ITEMS[0], "output": 2}])
    records, failures = read_function_records(path)
    assert failures == [] and records[0].output is None


@pytest.mark.parametrize(
    "lines, says",
    [
        ([ITEMS[0], "{not json\n"], "bench.jsonl:2: not valid JSON"),
        ([{k: v for k, v in ITEMS[0].items() if k != "output"}], "bench.jsonl:1: item 'b0' has no text field 'output'"),
        ([ITEMS[0], ITEMS[0]], "id 'b0' already used on line 1"),
        ([], "holds no items"),
    ],
)
def test_a_bad_benchmark_stops_with_the_line_and_the_fix(tmp_path, lines, says):
    with pytest.raises(ValueError) as error:
        read_benchmark(write(tmp_path, lines))
    assert says in str(error.value)


def test_a_missing_file_names_the_option(tmp_path):
    with pytest.raises(ValueError, match="--decontaminate"):
        read_benchmark(str(tmp_path / "absent.jsonl"), "--decontaminate")
