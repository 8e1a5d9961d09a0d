"""Which tracer backend traces, and tracing a source string with it in this process.

Which backend: `resolve_backend("auto")` is `monitoring` where `sys.monitoring` exists and `settrace` before
3.12; `settrace` or `monitoring` forces one. The backend is recorded in the trace: `tracer_version(backend)` is
`TRACER_VERSION` for settrace and `TRACER_VERSION + "+monitoring"` for sys.monitoring (the `traces` column
`tracer_version`; the headers also carry `tracer_backend`).

`trace_source` traces one call of a source string with the chosen backend (tests, notebooks, benchmarks);
`source_lines` and `call_arguments` are how it and the function runner read a record. Standard library only.
"""

import json
import sys

from tracers.trace.monitoring import MonitoringTracer
from tracers.trace.monitoring_tools import AVAILABLE
from tracers.trace.tracer import EVENT_FIELDS, TRACER_VERSION, Tracer

SETTRACE = Tracer.backend
MONITORING = MonitoringTracer.backend
BACKENDS = (SETTRACE, MONITORING)
CHOICES = ("auto",) + BACKENDS  # what a job may ask for: auto picks monitoring where the interpreter has it


def resolve_backend(requested="auto"):
    """The backend to use: `auto` picks monitoring where this interpreter has it; a forced one must exist here."""
    requested = requested or "auto"
    if requested == "auto":
        return MONITORING if AVAILABLE else SETTRACE
    if requested not in BACKENDS:
        raise ValueError("unknown tracer backend %r: choose auto, %s" % (requested, ", ".join(BACKENDS)))
    if requested == MONITORING and not AVAILABLE:
        raise ValueError(
            "tracer backend 'monitoring' needs CPython 3.12 or later (this is %d.%d)" % sys.version_info[:2]
        )
    return requested


def tracer_version(backend):
    """What a trace records as its tracer version: the settrace tracer's, marked when sys.monitoring made it."""
    return TRACER_VERSION if backend == SETTRACE else "%s+%s" % (TRACER_VERSION, backend)


def tracer_class(backend):
    """The Tracer class of a resolved backend."""
    return MonitoringTracer if backend == MONITORING else Tracer


def source_lines(code):
    """The lines of a source string as the compiler numbers them: only \\n, \\r\\n and \\r end a line
    (`str.splitlines` also splits at U+2028, U+0085 and form feeds, which may sit inside a string literal)."""
    return code.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def call_arguments(input_text, namespace):
    """(args, kwargs) of the call `entry(<input_text>)`, evaluated in `namespace`.

    The closing parenthesis is on a line of its own, so argument text that ends with a `# comment` means
    what it means in a real call instead of hiding the parenthesis.
    """
    return eval(compile("(lambda *a, **k: (a, k))(%s\n)" % input_text, "<input>", "eval"), namespace)


def trace_source(code, entry="f", input="", filename="<tracegen>", budgets=None, limits=None, backend="auto"):
    """Trace `entry(<input>)` of a source string in this process; returns {outcome..., events, backend}.

    A convenience for tests and notebooks: no sandbox, no fork. The pipeline uses
    `tracers.runners.functions`, which adds process isolation around the same Tracer. `backend`: auto,
    settrace or monitoring (`resolve_backend`).
    """
    backend = resolve_backend(backend)
    namespace = {"__name__": "__tracegen__"}
    exec(compile(code, filename, "exec"), namespace)
    args, kwargs = call_arguments(input, namespace)
    lines = source_lines(code)
    events = []
    tracer = tracer_class(backend)(
        is_traced=lambda c: c.co_filename == filename,
        source_line=lambda c, n: lines[n - 1] if 0 < n <= len(lines) else "",
        write=events.append,
        budgets=budgets,
        limits=limits,
    )
    outcome = tracer.run(namespace[entry], args, kwargs)
    result = outcome.as_dict()
    result["backend"] = backend
    result["events"] = [
        dict(zip(EVENT_FIELDS, values, strict=True)) for values in expand_locals(map(json.loads, events))
    ]
    for event in result["events"]:
        event["locals"] = dict(event["locals"])
    return result


def expand_locals(events):
    """The tracer's decoded event arrays with every event's locals as its full [[name, repr], ...] list.

    For the tracer's own output (tests, notebooks); the host's strict parser does the same for untrusted
    files, checking each reference (`pipeline.stages.tracefile`)."""
    last = {}
    for values in events:
        pairs = values[8]
        if type(pairs) is dict:
            pairs = [[name, pairs.get(name, text)] for name, text in last[values[2]]]
            values[8] = pairs
        last[values[2]] = pairs
        yield values
