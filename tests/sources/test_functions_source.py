"""Reading JSONL function records: every bad line is a failure row naming the line and the fix."""

import json

import pytest

from pipeline.sources.function_records import read_function_records


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


def test_lines_end_at_newline_only(tmp_path):
    """U+2028, U+2029, U+0085, form feeds and lone \\r are valid raw inside a JSON string: each record is one line."""
    codes = {
        "ls": "def f():\n    return 'a\u2028b'\n",
        "ps": "def f():\n    return 'a\u2029b'  # \u2029\n",
        "nel": "def f():\n    return 'a\x85b'\n",
        "ff": "def f():\n    return 'a\x0cb\x1c\x1d\x1e\x0b'\n",
    }
    path = tmp_path / "separators.jsonl"
    lines = [json.dumps({"id": k, "code": v, "input": ""}, ensure_ascii=False) for k, v in codes.items()]
    path.write_bytes("\n".join(lines).encode() + b"\n")
    records, failures = read_function_records(str(path))
    assert failures == [] and {r.id: r.code for r in records} == codes
    assert [r.input_ref for r in records] == [f"{path}:{n}" for n in range(1, 5)]


def test_invalid_utf8_is_a_failure_naming_the_line_and_nothing_is_replaced(tmp_path):
    good = json.dumps({"id": "ok", "code": "def f(): pass", "input": ""}).encode()
    bad = [
        b'{"id": "latin1", "code": "def f():\\n    return \'caf\xe9\'", "input": ""}',
        b'{"id": "overlong", "code": "\xc0\xaf", "input": ""}',
        b'{"id": "cesu_surrogate", "code": "\xed\xa0\x80", "input": ""}',
        b'{"id": "truncated", "code": "\xe2\x82", "input": ""}',
    ]
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b"\n".join([good, *bad, good.replace(b'"ok"', b'"ok2"')]) + b"\n")
    records, failures = read_function_records(str(path))
    assert [r.id for r in records] == ["ok", "ok2"]
    assert [f["error_type"] for f in failures] == ["InvalidUTF8"] * 4
    for number, failure in enumerate(failures, start=2):
        assert failure["input_ref"] == f"{path}:{number}" and f"{path}:{number}: not valid UTF-8" in failure["message"]
        assert failure["source_id"] is None


def test_a_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "first", "code": "def f(): pass", "input": ""}).encode())
    records, failures = read_function_records(str(path))
    assert failures == [] and [r.id for r in records] == ["first"]


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"id": "\ud800", "code": "def f(): pass", "input": ""}, "field 'id' holds a lone surrogate"),
        ({"id": "x", "code": "def f():\n    return '\udcff'", "input": ""}, "field 'code' holds a lone surrogate"),
        ({"id": "x", "code": "def f(a): pass", "input": "'\udfff'"}, "field 'input' holds a lone surrogate"),
        ({"id": "x", "code": "def f(): pass", "input": "", "entry": "\ud83d"}, "field 'entry' holds"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_text_no_table_can_hold_is_refused_with_the_line(tmp_path, fields, words):
    line = fields if isinstance(fields, str) else json.dumps(fields)  # json.dumps writes \\udXXX escapes
    good = json.dumps({"id": "ok", "code": "def f(): pass", "input": "", "emoji": "\U0001f600"})
    path = write(tmp_path, [good, line])
    records, failures = read_function_records(path)
    assert [r.id for r in records] == ["ok"] and len(failures) == 1
    assert words in failures[0]["message"] and failures[0]["input_ref"] == f"{path}:2"
    failures[0]["message"].encode("utf-8")
