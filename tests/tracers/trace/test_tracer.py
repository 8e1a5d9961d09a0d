"""The tracer against a minimal reference `sys.settrace` hook, and its budgets and edge cases."""

import dis
import sys

import pytest

from tracers.trace.backends import trace_source
from tracers.trace.tracer import Budgets

REF_FILE = "<reference>"


def reference_events(code: str, entry: str, input_text: str) -> list[tuple]:
    """(event, function, line) of every event of the code's frames, from the plainest possible hook.

    Two documented differences are applied: when an exception leaves a frame, settrace reports an
    `exception` then a `return` with None; tracegen ends such a frame with its `exception` node. And when the
    frame ran more code after its exception (a bare `raise` in an `except`, a `with`, a `finally`), settrace's
    `return` with None at an instruction that is no return or yield is the frame unwinding: tracegen ends it
    with an `exception` node at that line.
    """
    namespace = {}
    exec(compile(code, REF_FILE, "exec"), namespace)
    args, kwargs = eval("(lambda *a, **k: (a, k))(%s)" % input_text, namespace)
    events, last, raised = [], {}, set()

    def hook(frame, event, arg):
        if frame.f_code.co_filename != REF_FILE:
            return None
        raised.update([frame] if event == "exception" else [])
        if event == "return" and arg is None and frame in raised and last.get(frame) != "exception":
            at = {op.offset: op.opname for op in dis.get_instructions(frame.f_code)}.get(frame.f_lasti)
            event = event if at in ("RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE") else "exception"
        if not (event == "return" and last.get(frame) == "exception"):
            events.append((event, frame.f_code.co_qualname, frame.f_lineno))
        last[frame] = event
        return hook

    sys.settrace(hook)
    try:
        namespace[entry](*args, **kwargs)
    except Exception:
        pass
    finally:
        sys.settrace(None)
    return events


def good_examples(records):
    return [r for r in records if not r["id"].startswith("bad_")]


def test_event_sequences_match_the_reference_hook(example_records):
    checked = 0
    for record in good_examples(example_records):
        entry = record.get("entry", "f")
        ours = trace_source(record["code"], entry, record["input"])
        assert ours["exit"] in ("normal", "error"), record["id"]
        got = [(e["event"], e["function"], e["lineno"]) for e in ours["events"]]
        assert got == reference_events(record["code"], entry, record["input"]), record["id"]
        checked += 1
    assert checked >= 50


def test_frames_depths_and_parents_are_consistent(example_records):
    for record in good_examples(example_records):
        events = trace_source(record["code"], record.get("entry", "f"), record["input"])["events"]
        assert events[0]["event"] == "call" and events[0]["depth"] == 0
        assert events[0]["parent_frame_id"] is None
        depth_of = {}
        for event in events:
            depth_of.setdefault(event["frame_id"], event["depth"])
            if event["parent_frame_id"] is not None:
                assert event["depth"] >= 1
        assert [e["index"] for e in events] == list(range(len(events)))


WORKED = """def g(x):
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


def test_worked_example_locals_and_return_values():
    trace = trace_source(WORKED, "f", "3")
    events = trace["events"]
    assert trace["exit"] == "normal" and not trace["truncated"]
    assert events[0]["locals"] == {"a": "3"} and events[0]["source"] == "def f(a):"
    g_call = next(e for e in events if e["event"] == "call" and e["function"] == "g")
    assert g_call["locals"] == {"x": "4"} and g_call["depth"] == 1 and g_call["parent_frame_id"] == 0
    returns = [e for e in events if e["event"] == "return"]
    assert [r["arg"] for r in returns] == ["9", "7"]


def test_generator_resumes_are_calls_of_the_same_frame():
    code = "def gen(n):\n    for i in range(n):\n        yield i\n\ndef f(n):\n    return list(gen(n))\n"
    events = trace_source(code, "f", "2")["events"]
    gen_calls = [e for e in events if e["function"] == "gen" and e["event"] == "call"]
    assert len(gen_calls) == 3 and len({e["frame_id"] for e in gen_calls}) == 1
    yields = [e["arg"] for e in events if e["function"] == "gen" and e["event"] == "return"]
    assert yields == ["0", "1", "None"]


def test_uncaught_exception_ends_each_frame_with_its_exception_node():
    code = "def g():\n    raise KeyError('k')\n\ndef f():\n    g()\n"
    trace = trace_source(code, "f", "")
    assert trace["exit"] == "error"
    assert [(e["event"], e["function"]) for e in trace["events"]][-2:] == [("exception", "g"), ("exception", "f")]
    assert trace["events"][-1]["arg"] == "KeyError('k')"


def test_caught_exception_continues_with_lines():
    code = "def f():\n    try:\n        1 / 0\n    except ZeroDivisionError:\n        return 'ok'\n"
    trace = trace_source(code, "f", "")
    kinds = [e["event"] for e in trace["events"]]
    assert trace["exit"] == "normal" and "exception" in kinds and kinds[-1] == "return"


def test_event_budget_truncates_and_keeps_what_was_recorded():
    trace = trace_source("def f():\n    while True:\n        pass\n", "f", "", budgets=Budgets(max_events=50))
    assert (trace["exit"], trace["truncated"], trace["reason"]) == ("never", True, "max_events")
    assert len(trace["events"]) == 50


def test_time_budget_ends_an_infinite_loop():
    trace = trace_source(
        "def f():\n    while True:\n        pass\n", "f", "", budgets=Budgets(max_events=10**9, max_seconds=0.2)
    )
    assert (trace["exit"], trace["reason"]) == ("never", "max_seconds")


def test_code_that_swallows_the_stop_is_still_never():
    code = (
        "def f():\n    n = 0\n    while n < 100000:\n        try:\n            n += 1\n"
        "        except BaseException:\n            pass\n    return n\n"
    )
    trace = trace_source(code, "f", "", budgets=Budgets(max_events=30))
    assert trace["exit"] == "never" and trace["truncated"] and len(trace["events"]) == 30


def test_code_that_turns_tracing_off_is_not_trusted():
    code = "import sys\n\ndef f():\n    sys.settrace(None)\n    return 1\n"
    trace = trace_source(code, "f", "")
    assert (trace["exit"], trace["truncated"], trace["reason"]) == ("never", True, "tampered:sys.settrace")


def test_deep_recursion_never_crashes_the_tracer():
    code = "def f(n):\n    return f(n + 1)\n"
    trace = trace_source(code, "f", "0")
    assert trace["exit"] in ("error", "never") and len(trace["events"]) > 100


@pytest.mark.parametrize(
    "code, expected",
    [
        ("def f():\n    return [x * x for x in range(3)]\n", "[0, 1, 4]"),
        ("def f():\n    k = 2\n    def add(v):\n        return v + k\n    return list(map(add, [1, 2]))\n", "[3, 4]"),
        ("class A:\n    def __init__(self):\n        self.v = 1\n\ndef f():\n    return A().v\n", "1"),
    ],
)
def test_comprehensions_closures_and_classes_return_the_right_value(code, expected):
    trace = trace_source(code, "f", "")
    entry_return = [e for e in trace["events"] if e["event"] == "return" and e["depth"] == 0]
    assert entry_return[-1]["arg"] == expected


def test_traced_code_in_another_thread_ends_the_trace_with_consistent_indices():
    """Twenty runs of a thread pool racing on the tracer: each ends at the entry thread's next event."""
    code = (
        "from concurrent.futures import ThreadPoolExecutor\n\ndef work(n):\n    total = 0\n"
        "    for i in range(n):\n        total += i\n    return total\n\ndef f(n):\n"
        "    with ThreadPoolExecutor(4) as pool:\n        results = list(pool.map(work, [n] * 8))\n"
        "    return sum(results)\n"
    )
    for _ in range(20):
        result = trace_source(code, "f", "3000")
        assert [e["index"] for e in result["events"]] == list(range(len(result["events"])))
        assert (result["exit"], result["truncated"], result["reason"]) == ("never", True, "threads")
        assert {e["function"] for e in result["events"]} == {"f"}
