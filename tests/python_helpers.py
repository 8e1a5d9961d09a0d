"""Tests that need another CPython (3.12+, for the sys.monitoring tracer backend) find it through pyenv: skip
with the reason when pyenv has none, except under CI=true, where pyenv's 3.12 and 3.13 are part of the machine
(docs/tracing.md) and their absence fails the test."""

import json
import os
import subprocess
from pathlib import Path

import pytest

MONITORING_VERSIONS = ("3.12", "3.13")
ROOT = Path(__file__).resolve().parents[1]


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


def run_script(python: str, script: Path, *args: str) -> dict:
    """The JSON a test program prints when `python` runs it (with the project on its path, no user site)."""
    done = subprocess.run(
        [python, "-s", "-B", str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
