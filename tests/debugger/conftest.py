"""Fixtures of the debugger tests (helpers live in debugger_helpers.py, importable by test modules)."""

import pytest
from debugger_helpers import WORKED_EXAMPLE, trace_row

from pipeline.debugger import Trace


@pytest.fixture(scope="session")
def worked_trace() -> Trace:
    return Trace.from_row(trace_row(WORKED_EXAMPLE, "f", "3", trace_id="worked"))
