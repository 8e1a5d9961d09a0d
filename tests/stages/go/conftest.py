"""Fixtures of the Go stage tests: the real toolchain and harness, and the bundled programs (helpers in
tests/go_helpers.py)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from go_helpers import EXAMPLES, trace

from pipeline.engine.stats import StageOutput
from pipeline.sources.go_programs import GoProgram, discover_programs
from pipeline.stages.go.runs import GoSettings, GoTools


@pytest.fixture(scope="session")
def go_tools() -> GoTools:
    """The harness, built on the host once per machine (and the toolchain)."""
    return GoTools.resolve(GoSettings())


@pytest.fixture(scope="session")
def examples() -> dict[str, GoProgram]:
    return {p.program_id: p for p in discover_programs(str(EXAMPLES)) if isinstance(p, GoProgram)}


@pytest.fixture(scope="session")
def traced_examples(examples, go_tools) -> dict[str, StageOutput]:
    """Every bundled program traced once under bwrap (3 runs, at GOMAXPROCS 1, 2 and 4, 1 s each): the trace
    stage's output by program id, for the tests that check every run of every example. Four programs at a time:
    many of them deadlock or leak on purpose and spend their runs waiting for the timeout, not a core."""
    settings = {"runs": 3, "timeout_s": 1.0, "gomaxprocs": (1, 2, 4)}
    names = sorted(examples)
    with ThreadPoolExecutor(4) as pool:
        traced = pool.map(lambda name: trace(examples[name], go_tools, **settings)[0], names)
        return dict(zip(names, traced, strict=True))
