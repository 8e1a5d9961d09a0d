"""Helpers of the Go tests: the bundled programs, skip marks for the toolchain and bubblewrap, programs
written to disk, and one program traced under the bwrap sandbox."""

import shutil
from pathlib import Path

import pytest

from pipeline.engine.stats import StageOutput
from pipeline.sandbox import make_sandbox
from pipeline.sources.go_programs import GoProgram, discover_programs
from pipeline.stages.go.next_event import next_event_rows
from pipeline.stages.go.runs import GoSettings, GoTools, trace_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "go"

requires_go = pytest.mark.skipif(
    shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="the Go toolchain is not installed"
)
requires_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def write_program(directory: Path, files: dict[str, str]) -> GoProgram:
    """A program on disk from {file name: source}; returns it as the source would."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    [program] = [p for p in discover_programs(str(directory.parent)) if p.program_id == directory.name]
    return program


def trace(program: GoProgram, tools: GoTools, **settings) -> tuple[StageOutput, list[dict]]:
    """(the trace stage's output: go_runs, go_traces, failures; the go_next_event rows) of one program under
    the bwrap sandbox."""
    go = GoSettings(**settings)
    traced = trace_program(program, go, make_sandbox("bwrap", go.limits()), f"go:{program.program_id}", tools)
    distributions = next_event_rows(program.program_id, traced.rows("go_runs"), go.min_prefix_runs)
    return traced, distributions.rows("go_next_event")
