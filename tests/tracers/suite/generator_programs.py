"""Generator functions of a small repository, traced test by test by the entry tracer under either backend (run
by tests/tracers/suite/test_generator_entries.py under this interpreter and pyenv's CPython 3.12 and 3.13).

`python generator_programs.py BACKEND WORKDIR` writes the repository into WORKDIR, runs each of TESTS (plain
functions, as the pytest plugin runs tests: start, call, stop) under `tracers.suite.entry_tracer.EntryTracer`
(settrace) or `tracers.suite.entry_monitoring.MonitoringEntryTracer`, and prints the stream as JSON. BUDGETS
are small, so that a generator runs past its own budget over its resumes.
"""

import json
import os
import sys

MODULE = """
def inner(x):
    y = x + 1
    return y

def numbers(n):
    for i in range(n):
        yield inner(i)

def chain(n):
    yield -1
    yield from numbers(n)

def echo(n):
    yield (yield from numbers(n))

def guarded():
    try:
        yield 1
        yield 2
    finally:
        done = True

def catcher():
    try:
        yield 1
    except KeyError:
        caught = True
    yield 2

def explodes(n):
    yield n
    raise ValueError(n)

def pull(it):
    return next(it)

def drain(it):
    total = 0
    for value in it:
        total += value
    return total
"""


def _depths(m):
    it = m.numbers(3)
    next(it)  # from the test, at depth 0
    m.pull(it)  # from a repository function, at depth 1
    return list(it)


def _close(m):
    it = m.guarded()
    next(it)
    it.close()


def _break(m):
    for value in m.numbers(5):
        if value >= 2:
            break


def _throw(m):
    it = m.catcher()
    next(it)
    it.throw(KeyError("k"))
    return list(it)


def _partial(m):
    m.kept = m.numbers(5)  # still suspended when the test ends
    return next(m.kept)


def _interleaved(m):
    it = m.numbers(3)
    first = next(it)
    between = m.inner(10)
    second = next(it)
    return first, between, second, m.inner(20), list(it)


def _drain_past_budget(m):
    it = m.numbers(20)
    head = [next(it) for _ in range(10)]  # past the generator's own budget
    return head, m.drain(it)  # drain's entry records the resumes it makes


TESTS = [
    ("test_list", lambda m: list(m.numbers(3))),
    ("test_depths", _depths),
    ("test_yield_from", lambda m: list(m.chain(2))),
    ("test_yield_of_yield_from", lambda m: list(m.echo(1))),
    ("test_close", _close),
    ("test_break", _break),
    ("test_throw", _throw),
    ("test_partial", _partial),
    ("test_resumed_in_a_later_test", lambda m: list(m.kept)),
    ("test_raises", lambda m: list(m.explodes(3))),
    ("test_interleaved", _interleaved),
    ("test_past_budget", lambda m: list(m.numbers(20))),
    ("test_drain_past_budget", _drain_past_budget),
]

BUDGETS = {"max_events": 60, "max_entries_per_function_per_test": 5}


def main(argv):
    """`generator_programs.py BACKEND WORKDIR`: TESTS traced, the stream and the interpreter's version as JSON."""
    backend, workdir = argv
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from entry_harness import trace_tests

    stream, _ = trace_tests(backend, workdir, MODULE, TESTS, BUDGETS)
    json.dump({"stream": stream, "version": list(sys.version_info[:2])}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
