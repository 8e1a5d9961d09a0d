"""What several kinds share, defined once: the config bases of the kinds that run untrusted code (the sandbox) and
untrusted Python (the interpreter), the check of the tracer backend against that interpreter, and the memory
options of every job and of the refresh (where it runs: not settings, never hashed).
"""

import argparse
import os
import sys
from dataclasses import dataclass

from pipeline.engine.config import KindConfig, Option, setting
from pipeline.engine.errors import SetupError
from pipeline.engine.memory import OOM_RETRIES
from pipeline.sandbox import BACKENDS
from pipeline.sandbox.interpreters import describe, resolve_python


@dataclass(frozen=True)
class SandboxedConfig(KindConfig):
    """The config base of a kind whose units run untrusted code: which sandbox backend runs it."""

    sandbox: str = setting(
        "bwrap", Option("--sandbox", "where untrusted code runs; process runs it without isolation", choices=BACKENDS)
    )

    def __post_init__(self):
        super().__post_init__()
        if self.sandbox not in BACKENDS:
            raise ValueError(f"unknown sandbox {self.sandbox!r}: choose one of {', '.join(BACKENDS)}")


@dataclass(frozen=True)
class PythonConfig(SandboxedConfig):
    """The config base of a kind whose untrusted code is Python: the interpreter that runs it in the sandbox (a
    resolved path; None: the sandbox's own)."""

    python: str | None = setting(
        None,
        Option(
            "--python",
            "the interpreter that runs the traced code in the sandbox: a path, a command (python3.12) or a version "
            "pyenv has, e.g. 3.12",
            parse=lambda given: None if given is None else resolve_python(given),
            default_text="this one, under bwrap and process; docker always runs its image's",
        ),
    )

    def __post_init__(self):
        super().__post_init__()
        if self.python is not None and self.sandbox == "docker":
            raise ValueError("--python does not apply to --sandbox docker: it runs its image's Python")


def check_tracer_backend(sandbox: str, python: str | None, backend: str) -> None:
    """A forced `monitoring` backend needs CPython 3.12+ inside the sandbox: a SetupError before any work."""
    if backend != "monitoring":
        return
    if sandbox == "docker":
        return  # the image's Python: the runner inside refuses a backend it lacks (a failure row per chunk)
    interpreter = python or os.path.realpath(sys.executable)  # what bwrap and process run (Sandbox.python)
    found = describe(interpreter)
    if not found.has_monitoring:
        raise SetupError(
            f"--tracer-backend monitoring needs CPython 3.12 or later; {interpreter} is "
            f"{found.implementation} {'.'.join(map(str, found.version))}: choose --python 3.12 or --tracer-backend auto"
        )


def add_memory_options(parser: argparse.ArgumentParser, default: str = "the kind's") -> None:
    """Memory per unit (pipeline/engine/memory.py): what each unit's Ray task asks for and is stopped past."""
    parser.add_argument(
        "--task-memory-mb",
        type=int,
        default=None,
        help=f"MB for one unit's Ray worker: Ray reserves it, the unit is stopped past it (default: {default})",
    )
    parser.add_argument(
        "--oom-retries",
        type=int,
        default=OOM_RETRIES,
        help=f"times a unit stopped for memory is run again before it is recorded failed (default {OOM_RETRIES})",
    )
