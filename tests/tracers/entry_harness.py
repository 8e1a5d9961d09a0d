"""The harness of the entry-tracer scripts (tests/tracers/suite/generator_programs.py,
tests/tracers/trace/entry_backend_programs.py), which run under other interpreters too: write a one-module
repository, then run its "tests" (plain functions, as the pytest plugin runs them: start, call, stop) under
`tracers.suite.entry_tracer.EntryTracer` (settrace) or `tracers.suite.entry_monitoring.MonitoringEntryTracer` into
one stream. Standard library and `tracers` only."""

import importlib.util
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trace_tests(backend, workdir, module_text, tests, budgets, *, record_s=None, before_import=None):
    """Run each (nodeid, test) of `tests` on the module written from `module_text`, traced by `backend`'s tracer with
    `budgets`; `record_s(nodeid)` is a test's recording time (None: unlimited), `before_import(tracer, module)` runs
    before the module's code. Returns (the stream's text, the tracer)."""
    sys.path.insert(0, ROOT)
    from tracers.suite.entry_monitoring import MonitoringEntryTracer
    from tracers.suite.entry_tracer import EntryTracer
    from tracers.suite.pytest_plugin import Sink, header
    from tracers.suite.repo_code import PathFilter

    root = os.path.join(workdir, "repo")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "mod.py"), "w") as handle:
        handle.write(module_text)
    spec = importlib.util.spec_from_file_location("mod", os.path.join(root, "mod.py"))
    module = importlib.util.module_from_spec(spec)
    buffer = io.StringIO()
    sink = Sink(buffer, 1 << 30)
    header(sink, budgets, backend)
    cls = MonitoringEntryTracer if backend == "monitoring" else EntryTracer
    tracer = cls(sink, PathFilter([root], ["**/*.py"], []), budgets)
    if before_import is not None:
        before_import(tracer, module)
    spec.loader.exec_module(module)  # after the tracer exists, as a suite's imports come after the plugin's
    for nodeid, test in tests:
        sink.obj(type="test", nodeid=nodeid)
        tracer.start(record_s(nodeid) if record_s else None)
        try:
            test(module)
        except Exception:
            pass
        finally:
            intact = tracer.stop()
        sink.obj(type="test_end", nodeid=nodeid, outcome="passed", message=None, intact=intact)
    tracer.close()
    return buffer.getvalue(), tracer
