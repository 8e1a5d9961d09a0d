"""Fixtures of the Go tests: the real toolchain and bubblewrap, programs on disk, traced once per module."""

import shutil
from pathlib import Path

import pytest

from pipeline.sandbox import make_sandbox
from pipeline.sources.go import GoProgram, discover_programs
from pipeline.stages.go_next_event import next_event_rows
from pipeline.stages.go_runs import GoSettings, GoTools, trace_program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "go"

requires_go = pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(),
                                 reason="the Go toolchain is not installed")
requires_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture(scope="session")
def go_tools() -> GoTools:
    """The harness, built on the host once per machine (and the toolchain)."""
    return GoTools.resolve(GoSettings())


@pytest.fixture(scope="session")
def examples() -> dict[str, GoProgram]:
    return {p.program_id: p for p in discover_programs(str(EXAMPLES)) if isinstance(p, GoProgram)}


def write_program(directory: Path, files: dict[str, str]) -> GoProgram:
    """A program on disk from {file name: source}; returns it as the source would."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    [program] = [p for p in discover_programs(str(directory.parent)) if p.program_id == directory.name]
    return program


def trace(program: GoProgram, tools: GoTools, **settings):
    """(ProgramResult, go_next_event rows) of one program under the bwrap sandbox."""
    go = GoSettings(**settings)
    result = trace_program(program, go, make_sandbox("bwrap", go.limits()), f"go:{program.program_id}", tools)
    rows, _ = next_event_rows(program.program_id, result.runs, go.min_prefix_runs)
    return result, rows
