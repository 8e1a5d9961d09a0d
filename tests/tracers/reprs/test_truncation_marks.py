"""Issue 10, item 9: a value cut by a repr cap says so, and can never be read as a value.

Every cap writes the mark `…` (U+2026) where the cut is: no CPython repr writes it outside a quoted
string, and it is not Python syntax, so a capped repr never parses (`ast.literal_eval` fails). A
self-reference still renders as CPython prints it (`[...]`); a depth cut is `[…]`. Values no cap cut are
CPython's repr, byte for byte. The tracer counts the capped values of a trace (`n_capped`).
"""

import ast
import collections
import functools

import pytest

from tracers.reprs.saferepr import SafeRepr
from tracers.trace.backends import trace_source

safe = SafeRepr()

CAPPED = {
    "list past max_items": (
        list(range(32)),
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, …+12]",
    ),
    "tuple past max_items": (tuple(range(21)), None),
    "dict past max_items": ({i: i for i in range(25)}, None),
    "set past max_items": (set(range(30)), None),
    "str past max_chars": ("x" * 250, "'" + "x" * 198 + "…"),
    "bytes past max_chars": (b"y" * 210, None),
    "nested past max_depth": ([[[[[1]]]]], "[[[[[…]]]]]"),
    "dict past max_depth": ({"a": {"b": {"c": {"d": {}}}}}, "{'a': {'b': {'c': {'d': {…}}}}}"),
    "deque past max_items": (collections.deque(range(30)), None),
    "partial with many args": (functools.partial(max, *range(25)), None),
    "long row of long strings": (["s" * 150] * 3, None),
    "int past max_chars digits": (10**300, "<int with ~301 digits>"),
}


@pytest.mark.parametrize("name", sorted(CAPPED))
def test_a_capped_value_carries_the_mark_and_never_parses(name):
    value, expected = CAPPED[name]
    text = safe(value)
    assert safe.capped, name
    assert "…" in text or text.startswith("<int with"), text
    if expected is not None:
        assert text == expected
    with pytest.raises((SyntaxError, ValueError)):
        ast.literal_eval(text)


def test_a_self_reference_is_still_cpythons_and_whole_values_are_unchanged():
    looped = [1]
    looped.append(looped)
    assert safe(looped) == repr(looped) == "[1, [...]]" and not safe.capped
    for value in (list(range(20)), "x" * 198, {i: str(i) for i in range(20)}, [[[1]]], "wait…", (1,), b"\xff" * 40):
        assert safe(value) == repr(value) and not safe.capped, value


def test_a_string_holding_the_mark_is_not_capped():
    assert safe("…+12") == "'…+12'" and not safe.capped
    assert ast.literal_eval(safe("…+12")) == "…+12"


def test_the_trace_counts_its_capped_values():
    code = (
        "def f(n):\n"
        "    big = list(range(n))\n"  # capped from here on: in the locals of 3 line events and of the return
        "    small = [1, 2]\n"
        "    text = 'z' * 300\n"  # capped in the locals of 1 line event and of the return
        "    return len(big)\n"
    )
    trace = trace_source(code, "f", "50")
    marked = [text for event in trace["events"] for text in list(event["locals"].values()) + [event["arg"]] if text]
    assert trace["n_capped"] == sum("…" in text for text in marked) == 6
    assert trace_source(code, "f", "5")["n_capped"] == 2  # only the string
