"""Function records from JSONL: `{"id": str, "code": str, "input": str, "entry": str = "f"}` per line.

`input` is the argument text of the call `entry(<input>)`, the common format of function-level corpora.
A bad line (not UTF-8, not JSON, a missing or mistyped field, a repeated id) becomes a failure row naming
the file, the line and the fix; it never stops the read. A text `output` (the expected return value's literal,
as benchmarks give it) is kept; other extra fields (tags, outputs of other types) are ignored.

The file is read exactly: lines end at "\n" only (U+2028, U+0085 and friends are valid inside a JSON
string), a leading UTF-8 byte order mark is skipped, and no byte is ever replaced: code that is not what
the file says is never traced. A field holding a lone surrogate (a `\ud800`-style escape that is not half
of a pair) is refused too, since no UTF-8 table can hold it.
"""

import json
from dataclasses import dataclass

import pyarrow.fs as pafs

from pipeline.engine.failures import failure_row

REQUIRED = {"id": str, "code": str, "input": str}
OPTIONAL = {"entry": str}
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class FunctionRecord:
    id: str
    code: str
    input: str
    entry: str
    input_ref: str
    output: str | None = None  # the expected return value's literal text, when the line gives one (benchmarks)

    def request(self) -> dict:
        """The record as the sandboxed runner reads it."""
        return {"id": self.id, "code": self.code, "input": self.input, "entry": self.entry}


def read_function_records(uri: str) -> tuple[list[FunctionRecord], list[dict]]:
    """All good records of a JSONL file (or URI) in file order, and a failure row per bad line."""
    return parse_records(read_file_bytes(uri, "function records", "--input"), uri)


def read_file_bytes(uri: str, what: str, option: str) -> bytes:
    """A local file's or URI's bytes, without a leading UTF-8 byte order mark; a ValueError names `what` the file
    should hold and the `option` that gives it."""
    try:
        if "://" in uri:
            fs, path = pafs.FileSystem.from_uri(uri)
        else:
            fs, path = pafs.LocalFileSystem(), uri
        with fs.open_input_stream(path) as source:
            return source.read().removeprefix(BOM)
    except (FileNotFoundError, OSError) as error:
        raise ValueError(
            f"cannot read {what} from {uri!r}: {error}; pass an existing JSONL file with {option}"
        ) from error


def parse_records(data: bytes, uri: str) -> tuple[list[FunctionRecord], list[dict]]:
    """The good records of a JSONL file's bytes in file order, and a failure row per bad line."""
    records, failures, seen = [], [], {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        ref = f"{uri}:{number}"
        record = parse_bytes(raw, ref)
        if not isinstance(record, FunctionRecord):
            failures.append(failure_row("read", None, "read", *record, ref))
        elif record.id in seen:
            message = f"{ref}: id {record.id!r} already used on line {seen[record.id]}; give each record a unique id"
            failures.append(failure_row("read", record.id, "read", "DuplicateId", message, ref))
        else:
            seen[record.id] = number
            records.append(record)
    return records, failures


def parse_bytes(raw: bytes, ref: str) -> FunctionRecord | tuple[str, str]:
    """One line of the file, as read, to a record or (error_type, message)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return (
            "InvalidUTF8",
            f"{ref}: not valid UTF-8 (byte {error.start + 1} of the line is {raw[error.start : error.end]!r}); "
            f"write the file in UTF-8",
        )
    return parse_line(line, ref)


def parse_line(line: str, ref: str) -> FunctionRecord | tuple[str, str]:
    """One JSONL line to a record, or (error_type, message) explaining what is wrong with it."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        return (
            "MalformedJSON",
            f"{ref}: not valid JSON ({error.msg} at column {error.colno}); write one JSON object per line",
        )
    except RecursionError:
        return ("MalformedJSON", f"{ref}: JSON nested too deeply to read; write one flat record object per line")
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
        elif not _is_unicode(data[name]):
            return (
                "BadField",
                f"{ref}: field {name!r} holds a lone surrogate ({ascii(data[name])[:80]}); "
                f"write the text itself, or a surrogate pair for a character past U+FFFF",
            )
    if not data["id"]:
        return ("BadField", f"{ref}: field 'id' must not be empty")
    output = data.get("output")
    output = output if isinstance(output, str) and _is_unicode(output) else None
    return FunctionRecord(data["id"], data["code"], data["input"], data.get("entry") or "f", ref, output)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
