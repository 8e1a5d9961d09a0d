"""Tests that need another CPython (3.12+, for the sys.monitoring tracer backend) find it through pyenv: skip
with the reason when pyenv has none, except under CI=true, where pyenv's 3.12 and 3.13 are part of the machine
(README) and their absence fails the test."""

import os

import pytest

MONITORING_VERSIONS = ("3.12", "3.13")


def require_python(version: str) -> str:
    """The real path of pyenv's newest CPython `version` (e.g. "3.12"); skips (fails under CI=true) without."""
    from pipeline.sandbox.interpreters import describe, pyenv_python, pyenv_versions

    path = pyenv_python(version)
    if path is None:
        have = ", ".join(pyenv_versions()) or "none"
        why = f"pyenv has no Python {version} (installed: {have}; pyenv install {version})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    return describe(os.path.realpath(path)).path
