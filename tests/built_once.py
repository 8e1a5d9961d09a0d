"""Session fixtures built once per test run, however many pytest-xdist workers need them.

`make test` runs the suite on every core (pytest-xdist, one process per worker); a session fixture is made once
per worker process, so a dataset that takes a minute to trace would be traced once by each. `built_once` makes
such a fixture's directory once per run: the first worker to ask builds it under an flock in the run's shared temp
dir, the others wait for that build and read its files. Readers copy before they change anything, as they do for
any session fixture.
"""

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The directory `name`, made by `build(directory)` the first time any worker of this run asks for it. A build
    that raises leaves no mark: the next worker that asks builds it again."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # a worker's basetemp is RUN/popen-gwN, and RUN is the controller's, one per run
    shared = base / "built-once"
    shared.mkdir(exist_ok=True)
    directory, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            build(directory)
            done.touch()
    return directory
