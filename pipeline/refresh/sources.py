"""`sources.toml`: everything a refresh keeps up to date, in one file.

```toml
[[repo]]                      # exactly as in a repository manifest (pipeline/sources/repo_manifest.py)
name = "toolz"
url = "https://github.com/pytoolz/toolz"
ref = "master"                # resolved to its current commit at every refresh

[[repo]]
name = "six"
sdist = "six==1.16.0"         # a package-index sdist: immutable, so traced once and then kept

[[functions]]
path = "corpus/functions.jsonl"   # a JSONL file of {id, code, input, entry?}

[[go]]
path = "corpus/go"                # a directory whose subdirectories are Go programs
```

Relative paths are relative to the sources file. Any error (unknown table or key, wrong type, a
repeated repository name) is a ValueError naming the file, the line and the key.
"""

import os
import re
import tomllib
from dataclasses import dataclass

from pipeline.sources.repo_manifest import RepoSpec, _line_of, repo_specs

TABLES = ("repo", "functions", "go")
PATH_KEYS = ("path",)


@dataclass(frozen=True)
class Sources:
    """The validated sources: repositories in file order, functions files and Go directories (absolute)."""

    repos: tuple[RepoSpec, ...]
    functions: tuple[str, ...]
    go: tuple[str, ...]


def read_sources(path: str) -> Sources:
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError as error:
        raise ValueError(
            f"cannot read the sources file {path!r}: {error.strerror or error}; pass an existing TOML file "
            f"with --sources"
        ) from error
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from error
    for key, value in document.items():
        if key not in TABLES:
            raise ValueError(
                f"{path}: unknown top-level key {key!r}{_line_of(text, key, None)}; a sources file holds "
                f"[[repo]], [[functions]] and [[go]] tables"
            )
        if not isinstance(value, list) or not all(isinstance(table, dict) for table in value):
            raise ValueError(f"{path}: `{key}` must be an array of tables, written as [[{key}]] headers")
    repos = repo_specs(path, text, document.get("repo", []))
    base = os.path.dirname(os.path.abspath(path))
    paths = {name: _paths(path, text, name, document.get(name, []), base) for name in ("functions", "go")}
    return Sources(tuple(repos), paths["functions"], paths["go"])


def _paths(path: str, text: str, name: str, tables: list[dict], base: str) -> tuple[str, ...]:
    found = []
    for position, table in enumerate(tables):
        where = f"{path}: [[{name}]] #{position + 1}"
        line = _table_line(text, name, position)
        for key in table:
            if key not in PATH_KEYS:
                raise ValueError(f"{where}: unknown key {key!r}{line}; known keys: {', '.join(PATH_KEYS)}")
        value = table.get("path")
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where}: `path` must be a non-empty string{line}")
        found.append(value if "://" in value else os.path.normpath(os.path.join(base, value)))
    return tuple(found)


def _table_line(text: str, name: str, position: int) -> str:
    """' (line N)' of the position-th [[name]] header."""
    seen = -1
    for number, line in enumerate(text.splitlines()):
        if re.match(r"\s*\[\[\s*%s\s*\]\]" % re.escape(name), line):
            seen += 1
            if seen == position:
                return f" (line {number + 1})"
    return ""
