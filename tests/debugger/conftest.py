"""Fixtures of the debugger tests: real traces made in-process with the tracer."""

import pytest

from pipeline.debugger import Trace
from tracers.pytrace import trace_source

WORKED_EXAMPLE = """def g(x):
    y = x * 2
    return y + 1

def f(a):
    b = a + 1
    c = g(b)
    d = c - a
    for i in range(2):
        d += i
    return d
"""


def trace_row(code: str, entry: str = "f", input: str = "", trace_id: str = "t0", **budgets) -> dict:
    """A `traces`-shaped row (locals as pairs, as `to_pylist()` gives them) from tracing `entry(input)`."""
    from tracers.pytrace import Budgets

    result = trace_source(code, entry, input, budgets=Budgets(**budgets) if budgets else None)
    events = [{**event, "locals": list(event["locals"].items())} for event in result["events"]]
    return {"trace_id": trace_id, "source_id": trace_id, "source_kind": "function", "code": code,
            "exit": result["exit"], "truncated": result["truncated"], "n_events": len(events), "events": events}


@pytest.fixture(scope="session")
def worked_trace() -> Trace:
    return Trace.from_row(trace_row(WORKED_EXAMPLE, "f", "3", trace_id="worked"))
