"""A large suite as several units: the test modules of a checkout, cut into ranges of about `tests_per_unit` tests.

A repository whose suite is larger than one unit should hold (thousands of tests: one task's hours, one retry
that repeats them all) is planned as pieces, each a unit of its own with its own install, runs, time budget and
retries. Pieces are found on the host from the checkout's files alone — no code of the repository runs:

- **Test modules** are the files pytest would collect by default: `python_files` (default `test_*.py
  *_test.py`) under `testpaths` (default: the root), read from the first of pytest.ini, pyproject.toml
  (`[tool.pytest.ini_options]`), tox.ini, setup.cfg that has a pytest section, skipping pytest's default
  `norecursedirs` and virtual environments. A configuration the reader does not understand (a `python_files`
  that names no glob) leaves the repository whole.
- **Tests per module** are counted from its syntax tree (`ast`, never run): `test*` functions, `test*` methods
  of classes, each times the length of a literal `parametrize` list. A module that does not parse counts one.
  Only regular files are read (no link, FIFO or device); a test module over MAX_MODULE_BYTES is not listed.
- **Pieces** are contiguous ranges of the modules in path order, cut once a range holds `tests_per_unit`
  tests. Piece 1 runs the suite as the repository's CI does with the other pieces' modules `--ignore`d (so it
  also runs whatever is not a test module: doctests, text files); every other piece runs its own modules,
  named on pytest's command line. Together they run each test once.

A repository with its own `test` arguments in the manifest is never split (they choose what runs), nor is one
whose count stays within `tests_per_unit`. Identical traces are stored once per piece: two pieces of one
repository may store the same trace (same `trace_id`, a content hash) — readers that want each once drop
repeated ids.
"""

import ast
import configparser
import fnmatch
import os
import stat
import tomllib
from dataclasses import dataclass, replace

from pipeline.sources.repo_manifest import RepoSpec

DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
NORECURSE = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}", "__pycache__")
MAX_MODULE_BYTES = 1 << 20  # a larger test module is not listed (the first piece runs it)
MAX_MODULES = 20_000  # a checkout with more test files than this is left whole
MAX_CONFIG_BYTES = 1 << 20  # a larger configuration file is not read
# where pytest reads its options, in its order, and the section (None: pyproject's [tool.pytest.ini_options])
CONFIG_FILES = (("pytest.ini", "pytest"), ("pyproject.toml", None), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))


@dataclass(frozen=True)
class TestModule:
    """A test module by its path relative to the repository root, and its estimated number of tests."""

    __test__ = False  # not a pytest class
    path: str
    tests: int


def repo_pieces(spec: RepoSpec, worktree: str, commit: str, tests_per_unit: int) -> list[RepoSpec]:
    """The specs of `spec`'s pieces at `commit` (its ref pinned to it, `test` the piece's pytest arguments,
    `piece` "k/n"), or [spec] unchanged when it stays one unit."""
    if spec.test or tests_per_unit <= 0:
        return [spec]
    modules = suite_modules(worktree)
    if modules is None or sum(module.tests for module in modules) <= tests_per_unit:
        return [spec]
    ranges = cut_ranges(modules, tests_per_unit)
    if len(ranges) == 1:
        return [spec]
    pinned = spec if spec.sdist else replace(spec, ref=commit)
    pieces = []
    for k, chosen in enumerate(ranges):
        if k == 0:
            args = tuple(f"--ignore={module.path}" for other in ranges[1:] for module in other)
        else:
            args = tuple(module.path for module in chosen)
        pieces.append(replace(pinned, test=args, piece=f"{k + 1}/{len(ranges)}"))
    return pieces


def cut_ranges(modules: list[TestModule], tests_per_unit: int) -> list[list[TestModule]]:
    """Contiguous ranges of `modules`, each closed once it holds `tests_per_unit` tests."""
    ranges: list[list[TestModule]] = [[]]
    held = 0
    for module in modules:
        if held >= tests_per_unit:
            ranges.append([])
            held = 0
        ranges[-1].append(module)
        held += module.tests
    return ranges


def suite_modules(worktree: str) -> list[TestModule] | None:
    """The checkout's test modules in path order, or None when its pytest configuration is not understood or
    it holds more than MAX_MODULES of them."""
    settings = pytest_settings(worktree)
    if settings is None:
        return None
    python_files, testpaths = settings
    root = os.path.realpath(worktree)
    found: list[TestModule] = []
    for start in testpaths:
        top = os.path.realpath(os.path.join(root, start))
        if not top.startswith(root + os.sep) and top != root:
            continue  # a testpath outside the checkout
        for directory, subdirs, files in os.walk(top):
            subdirs[:] = sorted(
                name
                for name in subdirs
                if not any(fnmatch.fnmatch(name, pattern) for pattern in NORECURSE)
                and not os.path.exists(os.path.join(directory, name, "pyvenv.cfg"))
                and not os.path.islink(os.path.join(directory, name))
            )
            for name in sorted(files):
                path = os.path.join(directory, name)
                if any(fnmatch.fnmatch(name, pattern) for pattern in python_files) and _regular(path, MAX_MODULE_BYTES):
                    found.append(TestModule(os.path.relpath(path, root), count_tests(path)))
                    if len(found) > MAX_MODULES:
                        return None
    unique = {module.path: module for module in found}
    return [unique[path] for path in sorted(unique)]


def pytest_settings(worktree: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(python_files globs, testpaths) from the first configuration file pytest would read; the defaults
    without one; None when its values are not plain globs."""
    section = _pytest_section(worktree)
    python_files = _words(section.get("python_files")) or DEFAULT_PYTHON_FILES
    testpaths = _words(section.get("testpaths")) or (".",)
    if not all(isinstance(item, str) and item.endswith(".py") and "/" not in item for item in python_files):
        return None
    return python_files, testpaths


def _pytest_section(worktree: str) -> dict:
    """The pytest options of the file pytest reads, as {name: str or list}."""
    for name, section in (
        ("pytest.ini", "pytest"),
        ("pyproject.toml", None),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        path = os.path.join(worktree, name)
        if not _regular(path, MAX_CONFIG_BYTES):
            continue
        try:
            if section is None:
                with open(path, "rb") as handle:
                    options = tomllib.load(handle).get("tool", {}).get("pytest", {}).get("ini_options")
                if isinstance(options, dict):
                    return options
                continue
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(path, encoding="utf-8")
        except (OSError, ValueError, UnicodeDecodeError, configparser.Error):
            continue
        if parser.has_section(section):
            return dict(parser.items(section))
        if name == "pytest.ini":
            return {}  # pytest.ini is pytest's even without the section
    return {}


def _words(value) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        return tuple(value)
    return ()


def _regular(path: str, max_bytes: int) -> bool:
    """A regular file (not a link, a FIFO or a device: the checkout is untrusted) of at most `max_bytes`."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size <= max_bytes


def count_tests(path: str) -> int:
    """The tests a module defines, estimated from its syntax tree (at least one)."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return 1
    tests = 0
    for node in tree.body:
        for item in node.body if isinstance(node, ast.ClassDef) else [node]:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                tests += _cases(item)
    return max(1, tests)


def _cases(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1, times the length of each literal list or tuple a `parametrize` decorator gives."""
    cases = 1
    for decorator in function.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize"
            and len(decorator.args) >= 2
            and isinstance(decorator.args[1], ast.List | ast.Tuple)
        ):
            cases *= max(1, len(decorator.args[1].elts))
    return cases
