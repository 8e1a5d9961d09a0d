"""What counts as a repository's own code, and how an entry call's arguments are rendered.

Used inside the sandbox by the pytest plugin (standard library only) and on the host to validate a
manifest's globs. A file is the repository's code when its path relative to the worktree matches an
`include` glob and no `exclude` glob; conftest.py and test modules never are.
"""

import dis
import os
import re

from tracers.json_writers import encode_object
from tracers.trace.tracer import yield_offsets

CO_NEWLOCALS = 0x0002
CO_VARARGS = 0x0004
CO_VARKEYWORDS = 0x0008
CO_GENERATOR = 0x0020
CO_ASYNC = 0x0080 | 0x0100 | 0x0200  # coroutine, iterable coroutine (types.coroutine), async generator
CO_SUSPENDS = CO_GENERATOR | CO_ASYNC
ALWAYS_EXCLUDED = ("**/conftest.py", "**/test_*.py", "**/*_test.py", "**/site-packages")
DEFAULT_INCLUDE = ("**/*.py",)
DEFAULT_EXCLUDE = (
    "**/tests",
    "**/test",
    "testing",
    "docs",
    "doc",
    "examples",
    "benchmarks",
    "setup.py",
    "noxfile.py",
    "**/.*",
)


def glob_regex(pattern):
    """Regex text for a path glob: `**/` any directories, `*` and `?` within one path segment.

    A pattern matches a path when it matches the path itself or one of its parent directories, so
    `tests` and `tests/**` both cover everything under tests/.
    """
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "(?:%s)(?:/.*)?" % "".join(out)


def _any_of(patterns):
    if not patterns:
        return None
    return re.compile("|".join(glob_regex(p) for p in patterns))


class PathFilter:
    """Maps a code object's file name to its repository path, or None when it is not repository code."""

    def __init__(self, roots, include=DEFAULT_INCLUDE, exclude=DEFAULT_EXCLUDE):
        self._roots = [os.path.join(os.path.realpath(root), "") for root in roots if root]
        self._include = _any_of(list(include))
        self._exclude = _any_of(list(exclude) + list(ALWAYS_EXCLUDED))
        self._cache = {}

    def relpath(self, filename):
        try:
            return self._cache[filename]
        except KeyError:
            pass
        rel = self._relpath(filename)
        self._cache[filename] = rel
        return rel

    def _relpath(self, filename):
        if not isinstance(filename, str) or not filename.endswith(".py"):
            return None
        for candidate in (os.path.abspath(filename), os.path.realpath(filename)):
            for root in self._roots:
                if candidate.startswith(root):
                    rel = candidate[len(root) :]
                    if self._include is None or not self._include.fullmatch(rel):
                        return None
                    if self._exclude.fullmatch(rel):
                        return None
                    return rel
        return None


class CodeInfo:
    """What the entry tracer knows of a repository code object. Entries are plain functions, methods and
    generator functions (whose frames suspend at a yield and are resumed); coroutines, async generators,
    lambdas and comprehensions are not. For a generator function (else None): `start`, the offset its frame's
    first activation starts at (a `call` event there is its call; elsewhere a resume), and `yields`, the
    offsets where a `return` event is a yield (tracers.trace.tracer.yield_offsets)."""

    __slots__ = (
        "path",
        "qualname",
        "qualname_json",
        "firstlineno",
        "can_enter",
        "suspends",
        "start",
        "yields",
        "params",
        "posonly",
        "varargs",
        "varkw",
    )

    def __init__(self, code, path):
        self.path = path
        self.qualname = getattr(code, "co_qualname", code.co_name)
        self.qualname_json = encode_object(self.qualname)
        self.firstlineno = code.co_firstlineno
        flags = code.co_flags
        self.suspends = bool(flags & CO_SUSPENDS)
        self.can_enter = bool(flags & CO_NEWLOCALS) and not flags & CO_ASYNC and not code.co_name.startswith("<")
        self.start = self.yields = None
        if self.can_enter and self.suspends:
            self.start = next((op.offset for op in dis.get_instructions(code) if op.opname == "RESUME"), None)
            self.yields = yield_offsets(code)
        n = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames
        self.params = names[:n]
        self.posonly = code.co_posonlyargcount
        self.varargs = names[n] if flags & CO_VARARGS else None
        self.varkw = names[n + (1 if flags & CO_VARARGS else 0)] if flags & CO_VARKEYWORDS else None


def render_input(info, pairs):
    """The entry call's arguments as `entry(<input>)` text: positional-only values bare, the other
    parameters as `name=repr`, then `*args` and `**kwargs` reprs (taken from the call event's locals)."""
    values = dict(pairs)
    parts = []
    for position, name in enumerate(info.params):
        if name not in values:
            continue
        parts.append(values[name] if position < info.posonly else "%s=%s" % (name, values[name]))
    if info.varargs is not None and info.varargs in values and values[info.varargs] != "()":
        parts.append("*" + values[info.varargs])
    if info.varkw is not None and info.varkw in values and values[info.varkw] != "{}":
        parts.append("**" + values[info.varkw])
    return ", ".join(parts)
