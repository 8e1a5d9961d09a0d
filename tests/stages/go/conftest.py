"""Fixtures of the Go stage tests: the real toolchain and harness, and the bundled programs (helpers in
tests/go_helpers.py)."""

import pytest
from go_helpers import EXAMPLES

from pipeline.sources.go_programs import GoProgram, discover_programs
from pipeline.stages.go.runs import GoSettings, GoTools


@pytest.fixture(scope="session")
def go_tools() -> GoTools:
    """The harness, built on the host once per machine (and the toolchain)."""
    return GoTools.resolve(GoSettings())


@pytest.fixture(scope="session")
def examples() -> dict[str, GoProgram]:
    return {p.program_id: p for p in discover_programs(str(EXAMPLES)) if isinstance(p, GoProgram)}
