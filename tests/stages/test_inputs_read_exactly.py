"""Issue 10 item 8 in the real bwrap sandbox: records read exactly from bytes are traced exactly (line
separators inside strings, a byte order mark, an input ending in a comment), and a record whose entry cannot
be called, or whose line is not UTF-8, is a failure row naming it; its neighbours are traced as in process."""

import json
import shutil

import pytest
from hostile_helpers import ORDINARY, assert_ordinary_untouched, assert_traced_as_in_process, trace_chunk

from pipeline.sources.function_records import read_function_records

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TRACED = {
    "line_separator_in_a_string": ("def f():\n    s = 'a\u2028b'\n    return len(s)  # \u2028 \x85\n", ""),
    "next_line_in_a_string": ("def f(n):\n    s = 'x\x85y\x0cz' * n\n    return s\n", "2"),
    "input_with_a_comment": ("def f(a, b):\n    return a * b\n", "6, 7  # the answer"),
    "input_over_lines": ("def f(a, b):\n    return a - b\n", "10,\n    3  # ten minus three"),
}
NOT_CALLABLE = {
    "entry_is_a_number": ("f = 3\n", "f", "int"),
    "entry_is_a_string": ("main = 'def f(): pass'\n", "main", "str"),
    "entry_is_a_module": ("import os as run\n", "run", "module"),
}


def test_records_read_from_bytes_are_traced_exactly(tmp_path):
    lines = [json.dumps({"id": k, "code": c, "input": i}, ensure_ascii=False) for k, (c, i) in TRACED.items()]
    lines += [json.dumps({"id": k, "code": c, "input": "", "entry": e}) for k, (c, e, _) in NOT_CALLABLE.items()]
    lines.insert(2, '{"id": "latin1", "code": "def f():\\n    return \'caf\xe9\'", "input": ""}')
    for name, (code, input_) in ORDINARY.items():
        lines += [json.dumps({"id": f"{k}_then_{name}", "code": code, "input": input_}) for k in ("bom", "mixed")]
    path = tmp_path / "exact.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + b"\n".join(line.encode("latin-1" if "latin1" in line else "utf-8") for line in lines)
    )
    records, read_failures = read_function_records(str(path))
    assert [(f["error_type"], f["input_ref"]) for f in read_failures] == [("InvalidUTF8", f"{path}:3")]
    rows, failures = trace_chunk(records)
    assert_ordinary_untouched(records, rows)
    for record in records:
        if record.id in TRACED:
            assert_traced_as_in_process(rows[record.id], record)
            assert rows[record.id]["exit"] == "normal"
    assert rows["line_separator_in_a_string"]["events"][1]["source"] == "    s = 'a\u2028b'"
    assert set(failures) == set(NOT_CALLABLE)
    for name, (_, entry, kind) in NOT_CALLABLE.items():
        failure = failures[name]
        assert (failure["stage"], failure["error_type"]) == ("setup", "TypeError")
        assert (
            f"record {name!r}" in failure["message"]
            and f"entry {entry!r} is a {kind}, not a function" in failure["message"]
        )
