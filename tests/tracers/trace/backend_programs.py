"""Programs that exercise every kind of event both tracer backends must agree on (run by
tests/tracers/trace/test_monitoring_backend.py under CPython 3.12+). Each: (name, code, entry, input, budgets).

Also runnable as a script under the interpreter to test (see `main`): it prints, per program, the trace
`tracers.trace.backends.trace_source` records, as JSON (the tracers package must be importable).
"""

import json
import sys

PROGRAMS = [
    ("loop", "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n", "f", "5", None),
    ("one_line_loop", "def f(n):\n    while n: n -= 1\n    return n\n", "f", "4", None),
    (
        "one_line_for",
        "def f(xs):\n    out = []\n    for x in xs: out.append(x * 2)\n    return out\n",
        "f",
        "[1, 2, 3]",
        None,
    ),
    (
        "nested_calls_and_recursion",
        "def fact(n):\n    if n <= 1:\n        return 1\n    return n * fact(n - 1)\n\n"
        "def f(n):\n    a = fact(n)\n    b = [fact(i) for i in range(3)]\n    return a, b\n",
        "f",
        "5",
        None,
    ),
    (
        "caught_exception",
        "def g(x):\n    if x < 0:\n        raise ValueError('negative %d' % x)\n    return x\n\n"
        "def f(xs):\n    out = []\n    for x in xs:\n        try:\n            out.append(g(x))\n"
        "        except ValueError as error:\n            out.append(str(error))\n        finally:\n"
        "            out.append('.')\n    return out\n",
        "f",
        "[1, -2, 3]",
        None,
    ),
    ("uncaught_exception", "def g():\n    return 1 / 0\n\ndef f():\n    x = 1\n    return g() + x\n", "f", "", None),
    (
        "reraise_and_chain",
        "def f():\n    try:\n        try:\n            {}['k']\n        except KeyError:\n            raise\n"
        "    except KeyError as e:\n        try:\n            raise RuntimeError('x') from e\n"
        "        except RuntimeError:\n            pass\n    return 2\n",
        "f",
        "",
        None,
    ),
    (
        "generators",
        "def gen(n):\n    for i in range(n):\n        got = yield i\n        if got:\n            yield got\n"
        "    return 'done'\n\n"
        "def f():\n    g = gen(3)\n    out = [next(g), g.send('s'), next(g)]\n    out += list(g)\n"
        "    return out\n",
        "f",
        "",
        None,
    ),
    (
        "generator_throw_and_close",
        "def gen():\n    try:\n        yield 1\n        yield 2\n    except KeyError:\n        yield 'caught'\n"
        "    finally:\n        x = 'cleanup'\n\n"
        "def f():\n    g = gen()\n    a = next(g)\n    b = g.throw(KeyError('k'))\n    g.close()\n"
        "    h = gen()\n    next(h)\n    h.close()\n    return a, b\n",
        "f",
        "",
        None,
    ),
    (
        "yield_from",
        "def inner():\n    yield 1\n    yield 2\n    return 3\n\n"
        "def outer():\n    r = yield from inner()\n    yield r\n\n"
        "def f():\n    return list(outer())\n",
        "f",
        "",
        None,
    ),
    (
        "coroutines",
        "import asyncio\n\nasync def work(x):\n    await asyncio.sleep(0)\n    return x * 2\n\n"
        "async def main():\n    a = await work(1)\n    b = await work(a)\n    return a + b\n\n"
        "def f():\n    return asyncio.run(main())\n",
        "f",
        "",
        None,
    ),
    (
        "classes_closures_lambdas",
        "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
        "    def norm(self):\n        return abs(self.x) + abs(self.y)\n\n"
        "def make(k):\n    def add(v):\n        return v + k\n    return add\n\n"
        "def f():\n    class Local:\n        z = 3\n    ps = [Point(i, -i) for i in range(3)]\n"
        "    key = lambda p: -p.norm()\n    best = sorted(ps, key=key)[0]\n    return make(Local.z)(best.norm())\n",
        "f",
        "",
        None,
    ),
    (
        "with_and_decorators",
        "import functools\n\nclass Ctx:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n\n"
        "def deco(fn):\n    @functools.wraps(fn)\n    def wrapper(*a):\n        return fn(*a) + 1\n"
        "    return wrapper\n\n"
        "@deco\ndef g(x):\n    return x\n\n"
        "def f():\n    with Ctx():\n        y = g(1)\n        raise ValueError(y)\n    return y\n",
        "f",
        "",
        None,
    ),
    (
        "while_else_break_continue",
        "def f(n):\n    i = 0\n    while True:\n        i += 1\n        if i % 2:\n            continue\n"
        "        if i > n:\n            break\n    else:\n        i = -1\n    for j in range(3):\n        pass\n"
        "    else:\n        j = 10\n    return i, j\n",
        "f",
        "7",
        None,
    ),
    (
        "match_statement",
        "def f(items):\n    out = []\n    for item in items:\n        match item:\n            case [x, y]:\n"
        "                out.append(x + y)\n            case {'k': v}:\n                out.append(v)\n"
        "            case _:\n                out.append(None)\n    return out\n",
        "f",
        "[[1, 2], {'k': 3}, 4]",
        None,
    ),
    ("max_events", "def f():\n    n = 0\n    while True:\n        n += 1\n", "f", "", {"max_events": 50}),
    (
        "max_events_swallowed",
        "def f():\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n"
        "    return 1\n",
        "f",
        "",
        {"max_events": 30},
    ),
    (
        "max_bytes",
        "def f():\n    s = ''\n    for i in range(1000):\n        s += 'x' * 10\n    return len(s)\n",
        "f",
        "",
        {"max_bytes": 4000},
    ),
    (
        "recursion_limit",
        "def r(n):\n    return r(n + 1)\n\ndef f():\n    try:\n        r(0)\n    except RecursionError:\n"
        "        return 'deep'\n",
        "f",
        "",
        {"max_events": 100000},
    ),
    (
        "threads",
        "import threading\n\ndef work(out):\n    out.append(1)\n\n"
        "def f():\n    out = []\n    t = threading.Thread(target=work, args=(out,))\n    t.start()\n    t.join()\n"
        "    return out\n",
        "f",
        "",
        None,
    ),
    (
        "stdlib_calls_back",
        "def key(x):\n    return -x\n\ndef f(xs):\n    import json\n    ys = sorted(xs, key=key)\n"
        "    return json.loads(json.dumps(ys)), list(map(key, xs))\n",
        "f",
        "[3, 1, 2]",
        None,
    ),
    (
        "comprehensions_and_genexp",
        "def f(n):\n    sq = [i * i for i in range(n)]\n    ev = {i for i in sq if i % 2 == 0}\n"
        "    total = sum(x for x in sq)\n    d = {k: v for k, v in zip('abc', sq)}\n"
        "    return sq, sorted(ev), total, d\n",
        "f",
        "4",
        None,
    ),
]


# Records that reach for sys.monitoring (or the settrace hooks) while traced: {name: (code, reason by backend)}.
# Under settrace the tracer needs no tool, but a record may still not touch sys.monitoring.
HOSTILE = {
    "free_tool_id": (
        "import sys\n\ndef f():\n    for tool in range(6):\n        sys.monitoring.free_tool_id(tool)\n    return 1\n",
        {"settrace": "tampered:sys.monitoring.free_tool_id", "monitoring": "tampered:sys.monitoring.free_tool_id"},
    ),
    "set_events_swallowed": (
        "import sys\n\ndef f():\n    for tool in range(6):\n        try:\n"
        "            sys.monitoring.set_events(tool, 0)\n"
        "        except BaseException:\n            pass\n    return 1\n",
        {"settrace": "tampered:sys.monitoring.set_events", "monitoring": "tampered:sys.monitoring.set_events"},
    ),
    "set_local_events": (
        "import sys\n\ndef f():\n    sys.monitoring.set_local_events(4, f.__code__, 0)\n    return 1\n",
        {
            "settrace": "tampered:sys.monitoring.set_local_events",
            "monitoring": "tampered:sys.monitoring.set_local_events",
        },
    ),
    "callback_fetched": (
        "import sys\n\ndef f():\n    e = sys.monitoring.events\n    for tool in range(6):\n"
        "        old = sys.monitoring.register_callback(tool, e.LINE, None)\n    return old\n",
        {
            "settrace": "tampered:sys.monitoring.register_callback",
            "monitoring": "tampered:sys.monitoring.register_callback",
        },
    ),
    "tool_ids_taken": (
        "import sys\n\ndef f():\n    for tool in range(6):\n        try:\n"
        "            sys.monitoring.use_tool_id(tool, 'x')\n"
        "        except ValueError:\n            pass\n    return 1\n",
        {"settrace": "tampered:sys.monitoring.use_tool_id", "monitoring": "tampered:sys.monitoring.use_tool_id"},
    ),
    "restart_events": (
        "import sys\n\ndef f():\n    sys.monitoring.restart_events()\n    return 1\n",
        {"settrace": "tampered:sys.monitoring.restart_events", "monitoring": "tampered:sys.monitoring.restart_events"},
    ),
    "monitoring_replaced": (
        "import sys, types\n\ndef f():\n    sys.monitoring = types.SimpleNamespace()\n    x = 1\n    return x\n",
        {"settrace": None, "monitoring": None},
    ),
    "settrace_none": (
        "import sys\n\ndef f():\n    sys.settrace(None)\n    return 1\n",
        {"settrace": "tampered:sys.settrace", "monitoring": "tampered:sys.settrace"},
    ),
    "frame_lines_switched_off": (
        "import sys\n\ndef f():\n    sys._getframe().f_trace_lines = False\n    x = 1\n    return x\n",
        {"settrace": "tracer_disabled", "monitoring": "tracer_disabled"},
    ),
    # settrace's local hook lives in f_trace; sys.monitoring never reads it: the trace is whole
    "frame_trace_cleared": (
        "import sys\n\ndef f():\n    sys._getframe().f_trace = None\n    x = 1\n    return x\n",
        {"settrace": "tracer_disabled", "monitoring": None},
    ),
    # the real set_events, kept from before the guards (BYPASS below): the end-of-trace check catches it
    "guards_bypassed": (
        "def f():\n    for tool in range(6):\n        try:\n            BYPASS(tool, 0)\n        except ValueError:\n"
        "            pass\n    x = 1\n    return x\n",
        {"settrace": None, "monitoring": "tracer_disabled"},
    ),
}


def main(argv):
    """`backend_programs.py BACKEND [EXAMPLES.jsonl]`: the traces of PROGRAMS (and of the corpus' good records)
    as JSON; `backend_programs.py hostile BACKEND`: the outcome of each HOSTILE record."""
    import builtins

    bypass = sys.monitoring.set_events if hasattr(sys, "monitoring") else None  # before any guard is installed
    from tracers.trace import monitoring_tools
    from tracers.trace.backends import trace_source
    from tracers.trace.tracer import Budgets

    monitoring_tools.install_guards()  # as the function runner does before any record runs
    if argv[0] == "hostile":
        builtins.BYPASS = bypass
        out = {}
        for name, (code, _) in HOSTILE.items():
            result = trace_source(code, "f", "", backend=argv[1])
            out[name] = {key: result[key] for key in ("exit", "truncated", "reason", "n_events")}
        json.dump(out, sys.stdout)
        return
    backend = argv[0]
    programs = list(PROGRAMS)
    if len(argv) > 1:
        with open(argv[1], encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        programs += [
            ("example:" + r["id"], r["code"], r.get("entry") or "f", r["input"], None)
            for r in records
            if not r["id"].startswith("bad_")
        ]
    out = {}
    for name, code, entry, input_text, budgets in programs:
        out[name] = trace_source(code, entry, input_text, budgets=Budgets(**(budgets or {})), backend=backend)
    json.dump({"python": "%d.%d.%d" % sys.version_info[:3], "traces": out}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
