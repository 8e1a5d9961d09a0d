"""The entry tracer and the host's cutting, in process: every repository call is an entry, cut from one stream.

The reference is the function tracer itself (`tracers.trace.backends.trace_source`): an entry cut out of a
repository stream must be exactly the trace the function tracer records for the same call.
"""

import functools

import pytest
from entry_helpers import Traced

from pipeline.stages.repos.stream import parse_repo_stream
from tracers.suite.pytest_plugin import TIME_SHARE, TracePlugin
from tracers.trace.backends import trace_source
from tracers.trace.tracer import Budgets


def plain(events):
    return [dict(event, locals=dict(event["locals"])) for event in events]


def call_with_input(module, entry: str, input_text: str):
    args, kwargs = eval("(lambda *a, **k: (a, k))(%s)" % input_text, vars(module))
    return getattr(module, entry)(*args, **kwargs)


def test_entries_equal_the_function_tracer_on_the_example_corpus(tmp_path, example_records):
    """For each example, the entry of its call is event for event what trace_source records.

    Code with generators is left out: a resumed generator's parent is its resumer here, where
    trace_source keeps the caller of its first resume."""
    compared = 0
    for record in example_records:
        entry = record.get("entry", "f")
        if record["id"].startswith("bad_") or "yield" in record["code"]:
            continue
        traced = Traced(tmp_path, record["code"])
        function = getattr(traced.module, entry, None)
        code = getattr(function, "__code__", None)
        if code is None or code.co_flags & 0x3A0 or code.co_name.startswith("<"):
            continue  # a generator function's call runs none of it (its resumes do); lambdas are never entries
        traced.run(functools.partial(call_with_input, entry=entry, input_text=record["input"]))
        ours = [
            events for mark, events in traced.entries() if mark["qualname"] == code.co_qualname and mark["start"] == 0
        ]
        reference = trace_source(record["code"], entry, record["input"])
        if reference["truncated"]:
            continue
        assert len(ours) == 1, record["id"]
        assert plain(ours[0]) == reference["events"], record["id"]
        compared += 1
    assert compared >= 50


NESTED = """
def inner(x):
    y = x + 1
    return y

def outer(a, b=2):
    total = 0
    for value in (a, b):
        total += inner(value)
    return total

def fails(x):
    raise ValueError(x)

def catches():
    try:
        fails(1)
    except ValueError:
        pass
    return "caught"

def numbers(n):
    for i in range(n):
        yield inner(i)

def consume(n):
    return sum(numbers(n))

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def signature(a, /, b, *rest, c, d=4, **extra):
    return a

def disables_tracing():
    import sys
    sys.settrace(None)
    return 1

class Box:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value
"""


MUTATES = """
def mutates(n):
    values = [n * 1000, 2000]
    for step in range(3):
        values[0] = values[0] + step + 1
        values.append(step)
    table = {"a": n * 1000}
    table["a"] = table["a"] + 1
    table["b"] = (1, 2)
    frozen = (values, 1)
    values.append(None)
    return values, table, frozen
"""


def test_cached_reprs_follow_in_place_changes(tmp_path):
    """Reprs of unchanged containers are reused; any change to what they show must still appear."""
    traced = Traced(tmp_path, MUTATES)
    traced.run(lambda m: m.mutates(7))
    ((_, events),) = traced.entries()
    assert plain(events) == trace_source(MUTATES, "mutates", "7")["events"]


def test_every_call_is_an_entry_with_relative_frames(tmp_path):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: m.outer(1))
    (first, first_events), (second, _), (outer, outer_events) = traced.entries()
    assert [e["qualname"] for e in (first, second, outer)] == ["inner", "inner", "outer"]
    assert (first["input"], second["input"], outer["input"]) == ("x=1", "x=2", "a=1, b=2")
    assert outer_events[-1]["event"] == "return" and outer_events[-1]["arg"] == "5"
    assert first_events[-1]["arg"] == "2" and outer["exit"] == first["exit"] == "normal"
    for events in (first_events, outer_events):
        assert events[0]["event"] == "call" and events[0]["frame_id"] == 0 and events[0]["depth"] == 0
        assert events[0]["parent_frame_id"] is None
        assert [e["index"] for e in events] == list(range(len(events)))
    nested = [e for e in outer_events if e["function"] == "inner"]
    assert {e["frame_id"] for e in nested} == {1, 2}
    assert all(e["depth"] == 1 and e["parent_frame_id"] == 0 for e in nested)
    # The inner entry is the same events as its part of the outer entry.
    assert [(e["event"], e["lineno"], e["locals"]) for e in first_events] == [
        (e["event"], e["lineno"], e["locals"]) for e in outer_events if e["frame_id"] == 1
    ]


def test_exceptions_end_an_entry_with_error_and_caught_ones_do_not(tmp_path):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: m.catches())
    (fails, fails_events), (catches, catches_events) = traced.entries()
    assert fails["exit"] == "error" and fails_events[-1]["event"] == "exception"
    assert fails_events[-1]["arg"] == "ValueError(1)"
    assert catches["exit"] == "normal" and catches_events[-1]["arg"] == "'caught'"


WITH_EXIT = """
class Guard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        cleaned = True
        return False

def fails_in_with(x):
    with Guard():
        raise ValueError(x)

def fails_in_finally(x):
    try:
        raise KeyError(x)
    finally:
        done = True

def reraises(x):
    try:
        raise KeyError(x)
    except KeyError:
        seen = True
        raise

def caught_then_none(x):
    try:
        raise KeyError(x)
    except KeyError:
        pass
    return None
"""


@pytest.mark.parametrize(
    "entry, arg, line",
    [("fails_in_with", "ValueError(3)", 12), ("fails_in_finally", "KeyError(3)", 18), ("reraises", "KeyError(3)", 25)],
)
def test_a_frame_that_runs_code_after_its_exception_ends_with_it_again(tmp_path, entry, arg, line):
    """A `with`'s __exit__, a `finally` or an `except` that re-raises runs after the frame's exception event;
    settrace then reports the frame leaving as a `return` with None. The entry is an error ending with its
    exception, repeated at the line it leaves from, as the function tracer records it."""
    traced = Traced(tmp_path, WITH_EXIT)
    traced.run(lambda m: getattr(m, entry)(3))
    marks = {mark["qualname"]: (mark, events) for mark, events in traced.entries()}
    mark, events = marks[entry]
    assert (mark["exit"], mark["truncated"]) == ("error", False)
    last = events[-1]
    assert (last["event"], last["function"], last["arg"], last["lineno"]) == ("exception", entry, arg, line)
    assert not [e for e in events if e["frame_id"] == 0 and e["event"] == "return"]
    assert plain(events) == plain(trace_source(WITH_EXIT, entry, "3")["events"])
    if entry == "fails_in_with":
        assert marks["Guard.__exit__"][0]["exit"] == "normal"  # an entry of its own, whole


def test_a_finalizer_that_runs_as_a_frame_unwinds_leaves_it_ending_with_its_exception(tmp_path):
    """Popping the unwinding frame's stack frees an object whose __del__ is repository code: its events come
    after the frame's exception and before the frame leaves, so the exception is repeated after them."""
    traced = Traced(
        tmp_path,
        "class Noisy:\n    def __del__(self):\n        gone = True\n\ndef takes(a, b):\n    return a\n\n"
        "def raises_while_holding():\n    return takes(Noisy(), 1 / 0)\n",
    )
    traced.run(lambda m: m.raises_while_holding())
    marks = {mark["qualname"]: (mark, events) for mark, events in traced.entries()}
    mark, events = marks["raises_while_holding"]
    assert mark["exit"] == "error" and not mark["truncated"]
    assert [(e["event"], e["function"]) for e in events][2:] == [
        ("exception", "raises_while_holding"),
        ("call", "Noisy.__del__"),
        ("line", "Noisy.__del__"),
        ("return", "Noisy.__del__"),
        ("exception", "raises_while_holding"),
    ]
    assert events[-1]["arg"] == events[2]["arg"] == "ZeroDivisionError('division by zero')"


def test_a_frame_that_caught_its_exception_still_returns(tmp_path):
    traced = Traced(tmp_path, WITH_EXIT)
    traced.run(lambda m: m.caught_then_none(3))
    ((mark, events),) = traced.entries()
    assert mark["exit"] == "normal" and events[-1]["event"] == "return" and events[-1]["arg"] == "None"


def test_a_generator_consumed_inside_an_entry_is_an_entry_of_its_own_too(tmp_path):
    """tests/tracers/suite/test_generator_entries.py has the generator entries' own cases."""
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: m.consume(3))
    marks = traced.entries()
    assert [mark["qualname"] for mark, _ in marks] == ["inner", "inner", "inner", "numbers", "consume"]
    events = marks[-1][1]
    generator_frames = {e["frame_id"] for e in events if e["function"] == "numbers"}
    assert len(generator_frames) == 1  # one frame id across its resumes
    assert events[-1]["arg"] == "6"
    numbers, numbers_events = marks[3]
    assert len(numbers["ranges"]) == 4 and numbers["input"] == "n=3" and numbers["exit"] == "normal"
    # the generator's entry is its activations inside consume's, each from its resume to its yield
    assert [(e["event"], e["function"]) for e in numbers_events] == [
        (e["event"], e["function"]) for e in events if e["depth"] >= 1
    ]


def test_methods_and_signatures(tmp_path):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: (m.Box(3).get(), m.signature(1, 2, 3, c=5, e=6)))
    marks = {mark["qualname"]: mark for mark, _ in traced.entries()}
    assert marks["Box.__init__"]["input"] == "self=Box(), value=3"  # rendered from its state, before __init__ sets it
    assert marks["Box.get"]["input"].startswith("self=Box(")
    assert marks["signature"]["input"] == "1, b=2, c=5, d=4, *(3,), **{'e': 6}"


def test_event_budget_cuts_outer_entries_with_their_true_prefix(tmp_path):
    full = Traced(tmp_path, NESTED)
    full.run(lambda m: m.outer(1))
    whole = full.entries()[-1][1]
    cut = Traced(tmp_path, NESTED, max_events=6)
    cut.run(lambda m: m.outer(1))
    marks = cut.entries()
    outer, events = marks[-1]
    assert outer["qualname"] == "outer" and outer["truncated"] and outer["exit"] == "never"
    assert outer["reason"] == "max_events" and len(events) == 6
    assert plain(events) == plain(whole[:6])
    inner = [(mark, ev) for mark, ev in marks if mark["qualname"] == "inner"]
    assert len(inner) == 2 and all(not mark["truncated"] and len(ev) == 4 for mark, ev in inner)


def test_byte_budget(tmp_path):
    traced = Traced(tmp_path, NESTED, max_bytes=400)
    traced.run(lambda m: m.outer(1))
    outer, events = traced.entries()[-1]
    assert outer["truncated"] and outer["reason"] == "max_bytes"
    assert 1 <= len(events) < 10


def test_entry_caps_bound_recursion(tmp_path):
    traced = Traced(tmp_path, NESTED, max_entry_depth=3, max_entries_per_function_per_test=5)
    traced.run(lambda m: m.fib(8))
    marks = traced.entries()
    assert len(marks) == 5
    top = marks[-1]
    assert top[0]["input"] == "n=8" and not top[0]["truncated"] and top[1][-1]["arg"] == "21"
    assert max(e["depth"] for e in top[1]) == 7  # the whole recursion is in the outermost entry


def test_the_run_wide_function_cap_leaves_every_later_test_its_first_entry(tmp_path):
    traced = Traced(tmp_path, NESTED, max_entries_per_function=2)
    for nodeid, x in (("test_a", 1), ("test_b", 10), ("test_c", 20)):
        traced.run(lambda m, x=x: (m.inner(x), m.inner(x + 1), m.inner(x + 2)), nodeid=nodeid)
    inputs = [mark["input"] for mark, _ in traced.entries()]
    assert inputs == ["x=1", "x=2", "x=10", "x=20"]  # test_a spends the cap; b and c get their first call


def test_a_test_past_its_time_share_records_nothing_more_and_the_next_test_starts_afresh(tmp_path):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: m.outer(1), nodeid="test_slow", record_s=0.0)  # spent at its first event
    traced.run(lambda m: m.outer(1), nodeid="test_next", record_s=60.0)
    marks = traced.entries()
    cut, events = marks[0]
    assert cut["qualname"] == "outer" and cut["truncated"] and cut["exit"] == "never"
    assert cut["reason"] == "time_share" and [e["event"] for e in events] == ["call"]
    assert [mark["qualname"] for mark, _ in marks[1:]] == ["inner", "inner", "outer"]
    assert not any(mark["truncated"] for mark, _ in marks[1:])


def test_a_halted_test_runs_on_without_the_hook_and_the_tracer_is_still_intact(tmp_path):
    import sys

    traced = Traced(tmp_path, NESTED)
    hooks = []
    traced.run(lambda m: (m.outer(1), hooks.append(sys.gettrace())), nodeid="test_slow", record_s=0.0)
    assert hooks == [None]  # taken off at the halt, inside the test
    assert traced.tracer._detached is True  # intact when it came off: stop() reports no tracer_disabled
    traced.run(lambda m: (m.outer(2), hooks.append(sys.gettrace())), nodeid="test_next")
    assert hooks[1] is not None and [mark["input"] for mark, _ in traced.entries()][-1] == "a=2, b=2"


def test_each_test_gets_a_share_of_the_time_left_once_the_suite_is_collected():
    plugin = TracePlugin(tracer=None, sink=None, wall_s=100.0)
    assert plugin._record_s() is None  # before collection: nothing to share between
    plugin.n_collected, plugin.n_tests = 10, 0
    assert TIME_SHARE * 9.0 < plugin._record_s() <= TIME_SHARE * 10.0
    plugin.n_tests = 9  # the last test gets what is left
    assert TIME_SHARE * 90.0 < plugin._record_s() <= TIME_SHARE * 100.0
    assert TracePlugin(tracer=None, sink=None)._record_s() is None  # no wall clock given: no share


def test_code_that_turns_tracing_off_leaves_a_cut_entry(tmp_path):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: (m.inner(1), m.disables_tracing(), m.inner(2)))
    marks = traced.entries()
    assert [mark["qualname"] for mark, _ in marks] == ["inner", "disables_tracing"]
    mark, events = marks[-1]
    assert mark["truncated"] and mark["exit"] == "never" and mark["reason"] == "tracer_disabled"
    assert events[0]["event"] == "call" and len(events) == 3


@pytest.mark.parametrize(
    "corruption, error",
    [
        (b'[0,"line",0,null,0,1,"f","x",[],null]\n', "an event outside a test"),
        (b'{"type":"test","nodeid":"t"}\n[5,"call",0,null,0,1,"f","x",[],null]\n', "index 5 out of order"),
        (
            b'{"type":"test","nodeid":"t"}\n[0,"call",0,null,0,1,"f","x",[],null]\n'
            b'{"type":"entry","frame":0,"start":0,"n":3,"end":3,"exit":"normal","truncated":false,"reason":null,'
            b'"path":"m.py","qualname":"f","firstlineno":1,"input":""}\n',
            "outside the test",
        ),
        (
            b'{"type":"test","nodeid":"t"}\n[0,"call",0,null,0,1,"f","x",[],null]\n'
            b'{"type":"entry","frame":0,"start":0,"n":1,"end":1,"exit":"normal","truncated":false,"reason":null,'
            b'"path":"../etc/passwd","qualname":"f","firstlineno":1,"input":""}\n',
            "bad path",
        ),
        (b'{"type":"pickle"}\n', "unknown object type"),
        (b"not json\n", "not JSON"),
    ],
)
def test_the_stream_is_parsed_strictly_and_earlier_tests_are_kept(tmp_path, corruption, error):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: m.inner(1))
    data = traced.buffer.getvalue().encode()
    stream = parse_repo_stream(data + corruption + b'{"type":"end","exitstatus":0}\n', 10**6)
    assert error in stream.error
    assert len(stream.tests) == 1 and len(stream.tests[0].entries) == 1


def test_a_torn_last_line_is_dropped(tmp_path):
    traced = Traced(tmp_path, NESTED)
    traced.run(lambda m: m.inner(1))
    stream = parse_repo_stream(traced.buffer.getvalue().encode() + b'{"type":"te', 10**6)
    assert stream.error is None and len(stream.tests) == 1


def test_budgets_are_validated_by_the_function_tracer_format():
    assert Budgets().max_events == 10_000  # the entry budget defaults to the function tracer's
