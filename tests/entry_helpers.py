"""The entry tracer in this process, on a module written for a test: its calls traced test by test as the pytest
plugin traces them, and the entries cut out of the stream as the host cuts them (`cut_entry`)."""

import importlib.util
import io
import itertools

from pipeline.stages.repos.cut import cut_entry
from pipeline.stages.repos.stream import parse_repo_stream
from tracers.suite.entry_tracer import EntryTracer
from tracers.suite.pytest_plugin import Sink, header
from tracers.suite.repo_code import PathFilter
from tracers.trace.backends import call_arguments

_names = itertools.count()


class Traced:
    """A module written into a fake repository, traced call by call as one pytest test would be."""

    def __init__(self, tmp_path, source: str, **budgets):
        root = tmp_path / f"repo{next(_names)}"
        root.mkdir()
        (root / "mod.py").write_text(source)
        spec = importlib.util.spec_from_file_location("__tracegen__", root / "mod.py")  # as trace_source names it
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.buffer = io.StringIO()
        self.sink = Sink(self.buffer, 1 << 30)
        header(self.sink, budgets)
        self.tracer = EntryTracer(self.sink, PathFilter([str(root)], ["**/*.py"], []), budgets)

    def run(self, fn, nodeid="test_x", record_s=None):
        self.sink.obj(type="test", nodeid=nodeid)
        self.tracer.start(record_s)
        try:
            fn(self.module)
        except Exception:
            pass
        finally:
            self.tracer.stop()
        self.sink.obj(type="test_end", nodeid=nodeid, outcome="passed", message=None)

    def entries(self):
        """[(entry object, cut events)] of every test, in the order the entries ended."""
        stream = parse_repo_stream(self.buffer.getvalue().encode(), 10**7)
        assert stream.error is None, stream.error
        return [(entry, cut_entry(test.events, entry)) for test in stream.tests for entry in test.entries]


def generator_entry_rows(tmp_path, code: str, entry: str, input_text: str) -> list[dict]:
    """`traces`-shaped rows (repository traces) of the generator entries the call `entry(<input_text>)` of
    `code` makes: those whose events are several activations of the generator's frame."""

    def call(module):
        args, kwargs = call_arguments(input_text, vars(module))
        return getattr(module, entry)(*args, **kwargs)

    traced = Traced(tmp_path, code)
    traced.run(call)
    return [
        {
            "trace_id": f"{mark['qualname']}@{mark['start']}",
            "source_id": mark["qualname"],
            "source_kind": "repo",
            "code": code,
            "exit": mark["exit"],
            "events": events,
        }
        for mark, events in traced.entries()
        if "ranges" in mark
    ]
