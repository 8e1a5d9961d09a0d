"""What counts as a repository's own code: manifest globs, and the path filter the tracer applies."""

import re

import pytest

from tracers.suite.repo_code import DEFAULT_EXCLUDE, PathFilter, glob_regex


@pytest.mark.parametrize(
    "pattern, path, matches",
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("tests", "tests/unit/test_x.py", True),
        ("tests", "tests.py", False),
        ("pkg/**", "pkg/a/b.py", True),
        (".*", ".venv/lib/x.py", True),
        (".*", "pkg/.hidden.py", False),
    ],
)
def test_globs(pattern, path, matches):
    assert bool(re.fullmatch(glob_regex(pattern), path)) is matches


def test_path_filter_keeps_the_repository_code_only(tmp_path):
    root = tmp_path / "repo"
    copy = tmp_path / "copy"
    keep = PathFilter([str(root), str(copy)], ["**/*.py"], ["docs"])
    assert keep.relpath(str(root / "pkg/mod.py")) == "pkg/mod.py"
    assert keep.relpath(str(copy / "pkg/mod.py")) == "pkg/mod.py"  # the install copy maps to the same path
    for excluded in (
        "pkg/conftest.py",
        "pkg/test_mod.py",
        "pkg/mod_test.py",
        "docs/conf.py",
        "pkg/data.txt",
        "venv/lib/python3.11/site-packages/six.py",
    ):
        assert keep.relpath(str(root / excluded)) is None, excluded
    assert keep.relpath("/usr/lib/python3/json/__init__.py") is None
    assert keep.relpath(str(tmp_path / "repo2/pkg/mod.py")) is None


def test_default_excludes_cover_test_helpers_anywhere(tmp_path):
    keep = PathFilter([str(tmp_path)], ["**/*.py"], DEFAULT_EXCLUDE)
    for excluded in (
        "tests/helpers.py",
        "pkg/tests/helpers.py",
        "pkg/test/util.py",
        ".venv/x.py",
        "setup.py",
        "pkg/.hidden/x.py",
    ):
        assert keep.relpath(str(tmp_path / excluded)) is None, excluded
    for kept in ("pkg/mod.py", "src/pkg/testing_utils.py", "pkg/testing/asserts.py"):
        assert keep.relpath(str(tmp_path / kept)) == kept
