"""Helpers of the hostile-record tests: ordinary records to put beside each hostile one, the check that they
come out exactly as a plain in-process trace, and the processes a test's sandbox may have left."""

import os
from dataclasses import replace

from pipeline.sandbox import make_sandbox
from pipeline.sandbox.bwrap import processes_of, sandbox_uid
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.runner_session import close_warm_sessions
from pipeline.stages.trace_functions import ReprLimits, TraceSettings, trace_functions, trace_id
from tracers.reprs.saferepr import Limits
from tracers.trace.backends import trace_source

FAST = TraceSettings(max_seconds=1.0, record_timeout_s=3.0)

ORDINARY = {
    "squares": ("def f(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n", "5"),
    "words": ("def f(s):\n    words = s.split()\n    return [w.upper() for w in words]\n", "'a bb ccc'"),
    "nodes": (
        "class Node:\n    def __init__(self, v):\n        self.v = v\n\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n\n"
        "def f(n):\n    node = Node(n)\n    return depth(node.v)\n",
        "3",
    ),
}

# Hostile code starts with this: the descriptor of its own trace (or parity) file, found as any code in the
# process can, the next record's file names, and a link planted once (the parity run does it again).
TRACE_FD = """import os, sys

def trace_fd():
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + name).endswith((".trace", ".parity")):
                return int(name)
        except OSError:
            pass
    raise LookupError("no trace file")

def next_path(kind):
    own = os.readlink("/proc/self/fd/%d" % trace_fd())
    number = int(os.path.basename(own).split(".")[0])
    return os.path.join(os.path.dirname(own), "%06d.%s" % (number + 1, kind))

def plant_link(target, path):
    if not os.path.lexists(path):
        os.symlink(target, path)

"""


def hostile(record_id: str, body: str, entry: str = "f", input_: str = "") -> FunctionRecord:
    """A hostile record: TRACE_FD's helpers, then `body`."""
    return FunctionRecord(record_id, TRACE_FD + body, input_, entry, f"hostile:{record_id}")


def beside_ordinary(hostiles: list[FunctionRecord]) -> list[FunctionRecord]:
    """Each hostile record followed by the three ordinary ones (ids `HOSTILE_then_NAME`)."""
    chunk = []
    for record in hostiles:
        chunk.append(record)
        chunk += [
            FunctionRecord(f"{record.id}_then_{name}", code, input_, "f", f"ordinary:{name}")
            for name, (code, input_) in ORDINARY.items()
        ]
    return chunk


def trace_chunk(
    records: list[FunctionRecord],
    sandbox_name: str = "bwrap",
    mode: str = "structural",
    python=None,
    tracer_backend="auto",
    **settings,
):
    """{source_id: traces row}, {source_id: failures row} of one chunk through the stage (`python`: the
    interpreter in the sandbox, None: the sandbox's own)."""
    output = trace_functions(
        records,
        make_sandbox(sandbox_name, python=python),
        replace(FAST, reprs=ReprLimits(mode=mode), tracer_backend=tracer_backend, **settings),
        "hostile",
    )
    rows = {row["source_id"]: row for row in output.rows("traces")}
    failures = {row["source_id"]: row for row in output.rows("failures")}
    assert len(rows) == len(output.rows("traces")) and len(failures) == len(output.rows("failures"))
    assert not set(rows) & set(failures), "a record in both tables"
    assert set(rows) | set(failures) == {record.id for record in records}, "a record in no table"
    return rows, failures


def assert_traced_as_in_process(row: dict, record: FunctionRecord, mode: str = "structural") -> None:
    """The row is exactly what tracers.trace.backends.trace_source records for the same code in this process."""
    expected = trace_source(record.code, record.entry, record.input, limits=Limits(mode=mode))
    assert [dict(event, locals=dict(event["locals"])) for event in row["events"]] == expected["events"], record.id
    assert (row["exit"], row["truncated"], row["truncation_reason"]) == (
        expected["exit"],
        expected["truncated"],
        expected["reason"],
    ), record.id
    events = [dict(event, locals=list(event["locals"].items())) for event in expected["events"]]
    assert row["trace_id"] == trace_id(record, events, expected["exit"]), record.id


def assert_ordinary_untouched(records: list[FunctionRecord], rows: dict, mode: str = "structural") -> None:
    ordinary = [record for record in records if "_then_" in record.id]
    assert ordinary
    for record in ordinary:
        assert record.id in rows, record.id
        assert_traced_as_in_process(rows[record.id], record, mode)


def assert_the_sandbox_leaves_nothing() -> None:
    """This test process's warm runner is alive (bwrap as root: processes of its uid), and once it is
    stopped no process of its sandboxes is left."""
    if os.geteuid() == 0:
        assert processes_of(sandbox_uid(long_lived=True)), "no warm runner to look for"
    close_warm_sessions()
    if os.geteuid() == 0:
        assert processes_of(sandbox_uid(long_lived=True)) == [] and processes_of(sandbox_uid()) == []
