"""Issue 10 item 1 in the real bwrap sandbox: whatever one record makes come out of the sandbox (values no
UTF-8 table holds, forged objects of the wrong types, the next record's paths planted), it is that record's
row or failure, and the ordinary records beside it come out exactly as traced in process."""

import shutil

import pytest
from hostile_helpers import assert_ordinary_untouched, beside_ordinary, hostile, trace_chunk

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FORGE = "PAYLOAD = %r\n\ndef f():\n    os.write(trace_fd(), PAYLOAD)\n    os._exit(0)\n"
REWRITE = (
    "PAYLOAD = %r\n\ndef f():\n    fd = trace_fd()\n    os.ftruncate(fd, 0)\n"
    "    os.pwrite(fd, PAYLOAD, 0)\n    os._exit(0)\n"
)
END = b'{"type": "end", "exit": "normal", "truncated": false}\n'

THING = "class Thing:\n    pass\n\ndef f():\n    thing = Thing()\n    thing.__dict__[%s] = 1\n    return 1\n"

# Records whose own trace is kept, its odd strings made valid Unicode: id -> (code, {repr mode: a text in a value}).
NORMALISED = {
    "repr_returns_a_lone_surrogate": (
        "class Odd:\n    def __repr__(self):\n        return os.fsdecode(b'\\xff')\n\n"
        "def f():\n    odd = Odd()\n    return 1\n",
        {"user": "\ufffd", "structural": "Odd()"},
    ),
    "attribute_named_by_an_undecodable_byte": (
        THING % "os.fsdecode(b'\\xff')",
        {"user": "<Thing object at 0x...>", "structural": "Thing(\ufffd=1)"},
    ),
    "attribute_named_by_escaped_utf8": (
        THING % "b'caf\\xc3\\xa9'.decode('ascii', 'surrogateescape')",
        {"user": "<Thing object at 0x...>", "structural": "Thing(café=1)"},
    ),
    "local_named_by_a_lone_surrogate": (
        "def f():\n    sys._getframe().f_locals['\\ud800'] = 1\n    x = 2\n    return x\n",
        {"user": "\ufffd", "structural": "\ufffd"},
    ),
    "function_named_by_a_lone_surrogate": (
        "def g():\n    return 2\n\ng.__code__ = g.__code__.replace(co_qualname='\\ud800')\n\n"
        "def f():\n    return g()\n",
        {"user": "\ufffd", "structural": "\ufffd"},
    ),
}

# Records that forge or break their own trace: id -> what the failure message names.
FORGED = {
    "forged_end_reason_is_an_object": FORGE % (b'{"type": "end", "exit": "never", "truncated": true, "reason": {}}\n'),
    "forged_end_exit_is_a_list": FORGE % (b'{"type": "end", "exit": ["normal"], "truncated": false}\n'),
    "forged_end_truncated_is_text": FORGE % (b'{"type": "end", "exit": "normal", "truncated": "no"}\n'),
    "forged_event_kind_is_a_list": FORGE % (b'[0, ["call"], 0, null, 0, 1, "f", "", [], null]\n' + END),
    "forged_line_nested_past_the_recursion_limit": FORGE % (b"[" * 100_000 + b"]" * 100_000 + b"\n" + END),
    "forged_header_python_is_an_object": REWRITE
    % (b'{"type": "header", "python": {"v": 3}}\n{"type": "start"}\n' + END),
    "forged_header_version_is_huge": REWRITE
    % (b'{"type": "header", "tracer_version": "' + b"9" * 5000 + b'"}\n' + END),
}
CAUSES = {
    "forged_end_reason_is_an_object": "bad end reason",
    "forged_end_exit_is_a_list": "bad end exit",
    "forged_end_truncated_is_text": "bad end truncated",
    "forged_event_kind_is_a_list": "unknown event type",
    "forged_line_nested_past_the_recursion_limit": "maximum recursion depth",
    "forged_header_python_is_an_object": "bad header python",
    "forged_header_version_is_huge": "bad header tracer_version",
}

# Records that plant something at the next record's file names before returning normally.
PLANTERS = {
    "next_trace_is_a_directory": "os.makedirs(next_path('trace') + '/inner')\n"
    "    open(next_path('trace') + '/inner/x', 'w').close()\n    os.mkdir(next_path('out'))",
    "next_trace_is_a_fifo": "os.mkfifo(next_path('trace'))\n    os.mkfifo(next_path('out'))",
    "next_trace_links_to_this_trace": "os.symlink(os.readlink('/proc/self/fd/%d' % trace_fd()), next_path('trace'))",
    "output_directory_made_read_only": "os.chmod(os.path.dirname(next_path('trace')), 0o500)",
}


@pytest.mark.parametrize("mode", ["structural", "user"])
def test_no_value_and_no_forgery_of_one_record_costs_another_its_trace(mode):
    records = beside_ordinary(
        [hostile(name, code) for name, (code, _) in NORMALISED.items()]
        + [hostile(name, code) for name, code in FORGED.items()]
        + [hostile(name, f"def f():\n    {body}\n    return 1\n") for name, body in PLANTERS.items()]
    )
    rows, failures = trace_chunk(records, mode=mode)
    assert_ordinary_untouched(records, rows, mode=mode)
    for name, (_, texts) in NORMALISED.items():
        events = rows[name]["events"]
        strings = [e["function"] for e in events] + [e["arg"] for e in events if e["arg"] is not None]
        strings += [text for e in events for pair in e["locals"] for text in pair]
        assert any(texts[mode] in text for text in strings), (name, strings)
        for text in strings:
            text.encode("utf-8")  # valid Unicode: no lone surrogate is left
    for name, cause in CAUSES.items():
        failure = failures[name]
        assert (failure["stage"], failure["error_type"]) == ("parse", "BadTraceOutput")
        assert repr(name) in failure["message"] and cause in failure["message"], failure["message"]
    assert set(failures) == set(FORGED)
    assert all(rows[name]["exit"] == "normal" for name in PLANTERS)
