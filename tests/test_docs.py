"""The prose stays true to the tree: every repository path the docs name exists, and the README stays short.

A path is a run of path characters that starts with one of the repository's top-level directories
(`pipeline/...`, `tests/...`), anywhere in a doc (prose, code spans, code blocks); it ends before a `:`, so
`path::name` and `path:line` name `path`, and it is a path when it has an extension, ends in `/` or has three
parts or more (`docs/s` is a unit). `{a,b}` expands to both names; `<name>`, `{name}` (no comma), `*` and
`...`/`…` mark a placeholder or a pattern, which is not checked. A relative Markdown link must resolve from the
linking file's directory, as GitHub resolves it.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP_DIRS = (
    "bench",
    "docker",
    "docs",
    "examples",
    "go_harness",
    "jobs",
    "pipeline",
    "schemas",
    "scripts",
    "tests",
    "tracers",
)
DOCS = [ROOT / "README.md", ROOT / "bench" / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 260

# Not preceded by a path character, so `/abs/pipeline/x` and `../pipeline/x` are not repository-root paths.
REPO_PATH = re.compile(r"(?<![\w./~-])(?:%s)/[\w./{},*<>…-]*" % "|".join(TOP_DIRS))
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"<|\*|\.\.\.|…|\{[^},]*\}")


def expand(path: str) -> list[str]:
    """`a/{b,c}.py` → `a/b.py`, `a/c.py`, braces nested or repeated."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if match is None:
        return [path]
    head, tail = path[: match.start()], path[match.end() :]
    return [name for part in match.group(1).split(",") for name in expand(head + part + tail)]


def is_path(name: str) -> bool:
    """A file (an extension), a directory (a trailing `/`) or three parts or more; not `docs/s`."""
    return name.endswith("/") or name.count("/") > 1 or "." in name.rsplit("/", 1)[-1]


def cited_paths(text: str) -> set[str]:
    """The repository-root paths a doc names, placeholders left out."""
    paths = set()
    for match in REPO_PATH.finditer(text):
        expanded = expand(match.group(0).rstrip(".,"))
        paths.update(name for name in expanded if not PLACEHOLDER.search(name) and is_path(name))
    return paths


def test_expand_and_placeholders():
    assert expand("pipeline/stages/{dedup,dedup_distributed}.py") == [
        "pipeline/stages/dedup.py",
        "pipeline/stages/dedup_distributed.py",
    ]
    text = (
        "`pipeline/a/{b,c}.py::f`, tests/x.py:12, see docs/y.md. `jobs/….py` `schemas/{table}.py` "
        "`tests/kinds/test_<kind>.py` tests/requirements*.txt /abs/pipeline/z ../schemas/w.md 40 docs/s"
    )
    assert cited_paths(text) == {"pipeline/a/b.py", "pipeline/a/c.py", "tests/x.py", "docs/y.md"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_cited_paths_exist(doc: Path):
    missing = sorted(path for path in cited_paths(doc.read_text()) if not (ROOT / path).exists())
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:|#", target):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_readme_is_short():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the manual lives under docs/"
