"""Repository-like code traced by the entry tracer, test by test, under either backend (run by
tests/tracers/trace/test_monitoring_backend.py under CPython 3.12+).

`python entry_backend_programs.py BACKEND WORKDIR` writes a small repository into WORKDIR, runs its "tests"
(plain functions, as the pytest plugin would run them: start, call, stop) under `tracers.suite.entry_tracer.EntryTracer`
(settrace) or `tracers.suite.entry_monitoring.MonitoringEntryTracer`, and prints the stream. Small per-function and
per-test budgets make later tests run functions past their budget, and some tests run with no entry open
at all, so what the monitoring backend turns off (and on again) is exercised.
"""

import json
import os
import sys

MODULE = """
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

def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)

def spin(n):
    i = 0
    while i < n: i += 1
    return i

class Box:
    def __init__(self, items):
        self.items = list(items)

    def total(self):
        return sum(self.items, outer(0))

    @staticmethod
    def make(n):
        return Box(range(n))

def threaded():
    out = []
    worker = threading.Thread(target=lambda: out.append(inner(1)))
    worker.start()
    worker.join()
    return out

def gen_with_throw():
    def g():
        try:
            yield 1
        except KeyError:
            yield inner(2)
    it = g()
    next(it)
    return it.throw(KeyError())

class Guard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

class Noisy:
    def __del__(self):
        gone = True

def fails_in_with(x):
    with Guard():
        raise ValueError(x)

def reraises(x):
    try:
        fails(x)
    except ValueError:
        seen = True
        raise

def raises_while_holding():
    return outer(Noisy(), 1 / 0)

import threading

def free_every_tool():
    import sys
    refused = []
    for tool in range(6):
        try:
            sys.monitoring.free_tool_id(tool)
        except ValueError:
            refused.append(tool)
    return outer(len(refused))

def bypass_the_guards():
    for tool in range(6):
        try:
            BYPASS(tool, 0)
        except ValueError:
            pass
    return outer(2)
"""

TESTS = [
    ("test_outer", lambda m: m.outer(1)),
    ("test_catches", lambda m: m.catches()),
    ("test_consume", lambda m: m.consume(4)),
    ("test_fact", lambda m: m.fact(6)),
    ("test_many_calls", lambda m: [m.inner(i) for i in range(50)]),
    ("test_box", lambda m: m.Box.make(4).total()),
    ("test_spin", lambda m: m.spin(100)),
    ("test_uncaught", lambda m: m.fails(3)),
    ("test_threaded", lambda m: m.threaded()),
    ("test_gen_throw", lambda m: m.gen_with_throw()),
    ("test_unwinding", lambda m: [m.fails_in_with(1), m.reraises(2), m.raises_while_holding()]),
    ("test_halted", lambda m: [m.outer(i) for i in range(5)] + [m.fact(5), m.consume(3)]),  # no time to record
    ("test_after_halt", lambda m: (m.outer(7), m.fact(3))),
    ("test_past_budget", lambda m: [m.outer(i) for i in range(30)] + [m.fact(4) for _ in range(10)]),
    ("test_again", lambda m: (m.outer(5), m.consume(3), m.catches())),
    ("test_nothing_repo", lambda m: sorted(range(100), key=lambda v: -v)),
    ("test_last", lambda m: (m.fact(3), m.Box([1, 2]).total(), m.spin(5))),
]

HOSTILE_TESTS = [
    ("test_frees_every_tool", lambda m: m.free_every_tool()),
    ("test_after_the_refusal", lambda m: m.outer(1)),
    ("test_bypasses_the_guards", lambda m: m.bypass_the_guards()),
]

BUDGETS = {
    "max_events": 60,
    "max_entries_per_test": 12,
    "max_entries_per_function_per_test": 3,
    "max_entries_per_function": 6,
}


def main(argv):
    """`entry_backend_programs.py [hostile] BACKEND WORKDIR`: TESTS (or HOSTILE_TESTS) traced, the stream as JSON."""
    hostile = argv[0] == "hostile"
    backend, workdir = argv[-2:]
    bypass = sys.monitoring.set_events if hasattr(sys, "monitoring") else None  # before any guard is installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from entry_harness import trace_tests

    refused = []

    def before_import(tracer, module):
        from tracers.trace.monitoring_tools import add_refusal_listener

        add_refusal_listener(lambda name, tool: refused.append([name, tool]))
        module.BYPASS = bypass

    stream, tracer = trace_tests(
        backend,
        workdir,
        MODULE,
        HOSTILE_TESTS if hostile else TESTS,
        {} if hostile else BUDGETS,
        record_s=lambda nodeid: 0.0 if nodeid == "test_halted" else None,
        before_import=before_import,
    )
    json.dump(
        {"stream": stream, "events": tracer.n_events, "entries": tracer.n_entries, "refused": refused},
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
