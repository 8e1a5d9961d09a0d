"""Function records from JSONL: `{"id": str, "code": str, "input": str, "entry": str = "f"}` per line.

`input` is the argument text of the call `entry(<input>)`, the common format of function-level corpora.
A bad line (not JSON, a missing or mistyped field, a repeated id) becomes a failure row naming the
file, the line and the fix; it never stops the read. Extra fields (expected outputs, tags) are ignored.
"""

import json
from dataclasses import dataclass

import pyarrow.fs as pafs

from pipeline.engine.failures import failure_row

REQUIRED = {"id": str, "code": str, "input": str}
OPTIONAL = {"entry": str}


@dataclass(frozen=True)
class FunctionRecord:
    id: str
    code: str
    input: str
    entry: str
    input_ref: str

    def request(self) -> dict:
        """The record as the sandboxed runner reads it."""
        return {"id": self.id, "code": self.code, "input": self.input, "entry": self.entry}


def read_function_records(uri: str) -> tuple[list[FunctionRecord], list[dict]]:
    """All good records of a JSONL file (or URI) in file order, and a failure row per bad line."""
    try:
        if "://" in uri:
            fs, path = pafs.FileSystem.from_uri(uri)
        else:
            fs, path = pafs.LocalFileSystem(), uri
        with fs.open_input_stream(path) as source:
            text = source.read().decode("utf-8", "replace")
    except (FileNotFoundError, OSError) as error:
        raise ValueError(
            f"cannot read function records from {uri!r}: {error}; pass an existing JSONL file with --input"
        ) from error
    records, failures, seen = [], [], {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        ref = f"{uri}:{number}"
        record = parse_line(line, ref)
        if not isinstance(record, FunctionRecord):
            failures.append(failure_row("read", None, "read", *record, ref))
        elif record.id in seen:
            message = f"{ref}: id {record.id!r} already used on line {seen[record.id]}; give each record a unique id"
            failures.append(failure_row("read", record.id, "read", "DuplicateId", message, ref))
        else:
            seen[record.id] = number
            records.append(record)
    return records, failures


def parse_line(line: str, ref: str) -> FunctionRecord | tuple[str, str]:
    """One JSONL line to a record, or (error_type, message) explaining what is wrong with it."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        return (
            "MalformedJSON",
            f"{ref}: not valid JSON ({error.msg} at column {error.colno}); write one JSON object per line",
        )
    if not isinstance(data, dict):
        return ("MalformedRecord", f"{ref}: expected a JSON object, got {type(data).__name__}")
    for name, kind in {**REQUIRED, **OPTIONAL}.items():
        if name not in data:
            if name in REQUIRED:
                return (
                    "MissingField",
                    f"{ref}: missing field {name!r}; a record needs {', '.join(REQUIRED)} (and optionally entry)",
                )
        elif not isinstance(data[name], kind):
            return (
                "BadField",
                f"{ref}: field {name!r} must be a {kind.__name__}, got {type(data[name]).__name__}",
            )
    if not data["id"]:
        return ("BadField", f"{ref}: field 'id' must not be empty")
    return FunctionRecord(data["id"], data["code"], data["input"], data.get("entry") or "f", ref)
