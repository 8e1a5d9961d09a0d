"""Issue 10, item 7: cheap patches of the tracer never make a trace look whole (real bwrap sandbox).

Each hostile record patches what a record can reach without effort — builtins, `json`, the tracer's
modules and classes, the trace hook, a `gc` walk to the tracer's state, its own frame's tracing — and
either the tracer never sees the patch (the trace is the true one) or the trace ends marked: exit
`never`, truncated, with a reason naming what happened. The ordinary records beside them come out exactly
as `tracers.trace.backends.trace_source` records them.
"""

from hostile_helpers import assert_ordinary_untouched, beside_ordinary, hostile, trace_chunk

# f() builds a small list in a loop and returns it: its true trace ends `return [0, 1, 2]`.
HONEST_F = "def f():\n    out = []\n    for i in range(3):\n        out.append(i)\n    return out\n"

# Patched before the trace starts (module level): the sealed tracer must not see any of it.
UNSEEN = {
    "builtins_replaced": "import builtins\nbuiltins.repr = lambda o: 'forged'\nbuiltins.len = lambda o: 0\n"
    "builtins.type = lambda o: int\n",
    "json_replaced": 'import json\njson.dumps = lambda *a, **k: \'{"type": "end", "exit": "normal"}\'\n'
    "json.JSONEncoder.iterencode = lambda self, o, _one_shot=False: iter(['[]'])\n",
    "tracer_modules_replaced": "import tracers.trace.tracer as p, tracers.reprs.saferepr as s\n"
    "import tracers.json_writers as j\nj.compact = lambda record: '[]'\np.Tracer._emit = lambda *a: None\n"
    "s.SafeRepr.__call__ = lambda self, value: 'forged'\ns._cut = lambda text, limit: 'forged'\n",
}

# Patched while traced: refused, and the trace ends marked.
TAMPERING = {
    "settrace_none": ("import sys\n\ndef f():\n    sys.settrace(None)\n    return 1\n", "tampered:sys.settrace"),
    "hook_swapped_and_restored": (
        "import sys\n\ndef f():\n    hook = sys.gettrace()\n    try:\n        sys.settrace(None)\n"
        "    except BaseException:\n        pass\n    sys.settrace(hook)\n    return 1\n",
        "tampered:sys.settrace",
    ),
    "setprofile": (
        "import sys\n\ndef f():\n    sys.setprofile(lambda *a: None)\n    return 1\n",
        "tampered:sys.setprofile",
    ),
    "gc_walk_to_the_outcome": (
        "import gc\n\ndef f():\n    try:\n        for o in gc.get_objects():\n"
        "            if type(o).__name__ == 'Outcome':\n                o.truncated = False\n"
        "    except BaseException:\n        pass\n    return 1\n",
        "tampered:gc.get_objects",
    ),
    "gc_referents_of_the_hook": (
        "import gc, sys\n\ndef f():\n    try:\n        gc.get_referents(sys.gettrace())\n"
        "    except BaseException:\n        pass\n    return 1\n",
        "tampered:gc.get_referents",
    ),
    "frame_lines_switched_off": (
        "import sys\n\ndef f():\n    sys._getframe().f_trace_lines = False\n    x = 1\n    return x\n",
        "tracer_disabled",
    ),
    "frame_trace_cleared": (
        "import sys\n\ndef f():\n    sys._getframe().f_trace = None\n    x = 1\n    return x\n",
        "tracer_disabled",
    ),
    "budget_stop_swallowed_then_hook_walked": (
        "import sys\n\ndef f():\n    try:\n        while True:\n            pass\n    except BaseException:\n"
        "        pass\n    try:\n        sys.gettrace().__self__.outcome.truncated = False\n"
        "    except AttributeError:\n        pass\n    return 1\n",
        "max_events",
    ),
}


def test_patches_made_before_the_trace_are_not_seen_and_tampering_ends_the_trace_marked():
    records = beside_ordinary(
        [hostile(name, body + HONEST_F) for name, body in UNSEEN.items()]
        + [hostile(name, code) for name, (code, _) in TAMPERING.items()]
        + [hostile("gc_walk_at_import", "import gc\ngc.get_objects()\n" + HONEST_F)]
    )
    rows, failures = trace_chunk(records)
    assert_ordinary_untouched(records, rows)
    for name in UNSEEN:
        row = rows[name]
        assert (row["exit"], row["truncated"]) == ("normal", False), name
        assert row["events"][-1]["arg"] == "[0, 1, 2]" and row["n_events"] > 10, name
        assert dict(row["events"][-1]["locals"]) == {"out": "[0, 1, 2]", "i": "2"}, name
    for name, (_, reason) in TAMPERING.items():
        row = rows[name]
        assert (row["exit"], row["truncated"], row["truncation_reason"]) == ("never", True, reason), name
    failure = failures["gc_walk_at_import"]
    assert (failure["stage"], failure["error_type"]) == ("setup", "TracerTampered"), failure
    assert "gc.get_objects" in failure["message"]
