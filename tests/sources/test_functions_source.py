"""Reading JSONL function records: every bad line is a failure row naming the line and the fix."""

import json

import pytest

from pipeline.sources.functions import read_function_records


def write(tmp_path, lines):
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_good_records_keep_file_order_and_default_entry(tmp_path):
    path = write(
        tmp_path,
        [
            json.dumps({"id": "b", "code": "def f(): pass", "input": ""}),
            json.dumps({"id": "a", "code": "def g(): pass", "input": "", "entry": "g"}),
        ],
    )
    records, failures = read_function_records(path)
    assert [(r.id, r.entry) for r in records] == [("b", "f"), ("a", "g")] and failures == []
    assert records[1].input_ref == f"{path}:2"


@pytest.mark.parametrize(
    "line, error_type, words",
    [
        ('{"id": "x", "code": ', "MalformedJSON", "not valid JSON"),
        ('{"id": "x", "input": "1"}', "MissingField", "missing field 'code'"),
        ('{"id": "x", "code": 3, "input": "1"}', "BadField", "must be a str"),
        ("[1, 2]", "MalformedRecord", "expected a JSON object"),
    ],
)
def test_bad_lines_become_failures_and_do_not_stop_the_read(tmp_path, line, error_type, words):
    good = json.dumps({"id": "ok", "code": "def f(): pass", "input": ""})
    path = write(tmp_path, [line, good])
    records, failures = read_function_records(path)
    assert [r.id for r in records] == ["ok"]
    assert failures[0]["error_type"] == error_type and words in failures[0]["message"]
    assert failures[0]["input_ref"] == f"{path}:1" and f"{path}:1" in failures[0]["message"]


def test_repeated_ids_are_refused(tmp_path):
    line = json.dumps({"id": "dup", "code": "def f(): pass", "input": ""})
    records, failures = read_function_records(write(tmp_path, [line, line]))
    assert len(records) == 1 and failures[0]["error_type"] == "DuplicateId"


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="--input"):
        read_function_records(str(tmp_path / "missing.jsonl"))
