"""The host reads a repository function's source where the (untrusted) stream says it starts: the text is
exactly `inspect.getblock`'s, and the work and the rows it makes are bounded however the stream chooses the
(path, line) pairs and however many entries it sends."""

import inspect
import json
import os
import textwrap
import tokenize
from types import SimpleNamespace

import pytest

from pipeline.engine.failures import Failures
from pipeline.engine.stats import StageCounters
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos import cut
from pipeline.stages.repos.cut import EntryCutter, SourceReader
from pipeline.stages.repos.stream import parse_repo_stream
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.repos.trace import repo_input

AWKWARD = textwrap.dedent(
    '''\
    import functools

    @functools.lru_cache(
        maxsize=None,
    )
    def decorated(x):  # a comment on the def line
        return x

    def with_trailing_comments(a,
                               b):
        if a:
            return b
            # deeper than the body: kept
    # at column 0: not kept
        # at the body's column: kept, and the one above between them too
    square = lambda v: (v *
                        v)

    class Outer:
        """A class with a method and a one-liner."""
        def method(self): return 1

        async def coro(self):
            await thing()
    def one_liner(): return "x"  # then blank lines

    \tdef_not_a_def = 1
    text = """a string
    def inside_a_string():
        pass
    """
    def unterminated(
    '''
)


def reference(lines: list[str], first: int) -> str:
    """What the reader gave before it was bounded: `inspect.getblock`, the first line on a tokenize error."""
    try:
        return "".join(inspect.getblock(lines[first - 1 :]))
    except Exception:
        return lines[first - 1]


@pytest.mark.parametrize("module", ["awkward", inspect, json.decoder, tokenize, textwrap])
def test_every_line_gives_getblock_s_text(tmp_path, module):
    text = AWKWARD if module == "awkward" else open(module.__file__, encoding="utf-8").read()
    (tmp_path / "m.py").write_text(text, encoding="utf-8")
    lines = text.splitlines(keepends=True)
    reader = SourceReader(str(tmp_path))
    step = 1 if module == "awkward" else 5  # every line of the small file; many of the big ones
    for first in [n for n in range(1, len(lines) + 1) if n % step == 0 or lines[n - 1].lstrip()[:1] in "@dcla"]:
        assert reader.block("m.py", first) == reference(lines, first), first
    assert reader.block("m.py", 0) == reader.block("m.py", len(lines) + 1) == reader.block("missing.py", 1) == ""


def test_the_budget_bounds_what_any_choice_of_lines_costs(tmp_path):
    # No def anywhere: from each line the tokenizer would read to the end of the file.
    lines = [f"value_{n} = {n}\n" for n in range(5_000)]
    (tmp_path / "flat.py").write_text("".join(lines))
    (tmp_path / "other.py").write_text("def f():\n    return 1\n")
    budget = 200_000
    reader = SourceReader(str(tmp_path), budget)
    blocks = [reader.block("flat.py", first) for first in range(1, len(lines) + 1)]
    spent = budget - reader.budget
    assert spent <= budget + max(map(len, lines))  # unbounded, the lines read would be ~5000²/2 of them
    assert blocks[-1] == lines[-1]  # past the budget: the first line alone
    assert reader.block("other.py", 1) == ""  # and no file is read any more
    assert SourceReader(str(tmp_path)).block("other.py", 1) == "def f():\n    return 1\n"


def test_a_file_over_the_size_cap_is_not_read(tmp_path):
    (tmp_path / "big.py").write_text("def f():\n    return 1\n" + "#" * cut.MAX_SOURCE_BYTES + "\n")
    (tmp_path / "small.py").write_text("def f():\n    return 1\n")
    reader = SourceReader(str(tmp_path))
    assert reader.block("big.py", 1) == ""
    assert reader.block("small.py", 1) == "def f():\n    return 1\n"
    paid = os.path.getsize(tmp_path / "small.py") + len("def f():\n    return 1\n")
    assert reader.budget == cut.SOURCE_BUDGET - paid  # the small file and its block; nothing of the big one


def entries_stream(n: int, nodeid: str = "tests/test_x.py::test_x") -> bytes:
    """One test whose stream claims `n` calls of lib/long.py's `long` (line 1), each with its own input."""
    lines = [{"type": "header"}, {"type": "test", "nodeid": nodeid}]
    for k in range(n):
        lines.append([2 * k, "call", k, None, 0, 1, "long", "def long(x):", [["x", str(k)]], None])
        lines.append([2 * k + 1, "return", k, None, 0, 2, "long", "", [["x", str(k)]], str(k)])
        lines.append(
            dict(type="entry", frame=k, start=2 * k, n=2, end=2 * k + 2, firstlineno=1, exit="normal",
                 truncated=False, reason=None, path="lib/long.py", qualname="long", input=f"x={k}")
        )  # fmt: skip
    lines += [{"type": "test_end", "nodeid": nodeid, "outcome": "passed"}, {"type": "end"}]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


LONG = "def long(x):\n" + "".join(f"    y_{n} = x + {n}\n" for n in range(500)) + "    return x\n"


@pytest.mark.parametrize(
    "function, nodeid",
    [
        (LONG, "tests/test_x.py::test_x"),
        ("def long(x):\n    return x\n", "tests/test_x.py::test_x[" + "a" * 20_000 + "]"),
    ],
    ids=["long_function", "long_test_id"],
)
def test_many_entries_cannot_make_rows_far_larger_than_the_stream(tmp_path, function, nodeid):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "long.py").write_text(function)
    counter, failures = StageCounters("cut"), Failures("u")
    spec = RepoSpec(name="inflate", url="file:///inflate", ref="main")
    checkout = SimpleNamespace(path=str(tmp_path), commit="0" * 40, url="")
    per_row = len(function) + len(nodeid)
    cutter = EntryCutter(spec, checkout, RepoTraceSettings(), counter, row_text_budget=10 * per_row)
    stream = parse_repo_stream(entries_stream(200, nodeid), 10_000, on_test=cutter)
    assert stream.error is None
    rows, dropped = cutter.finish()
    failures.extend(repo_input(spec), dropped)
    assert len(rows) == 10 and all(row["code"] == function and row["test_id"] == nodeid for row in rows)
    assert [row["input"] for row in rows] == [f"x={k}" for k in range(10)]  # the first ones, in stream order
    assert counter.dropped["RowTextBudget"] == 190
    [(stage, error_type, message)] = [(row["stage"], row["error_type"], row["message"]) for row in failures.rows]
    assert (stage, error_type) == ("parse", "RowTextBudget") and "'inflate': 190 entries dropped" in message
