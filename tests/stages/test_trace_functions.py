"""The function trace stage in the real bwrap sandbox: values, bad inputs, isolation of records."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hostile_helpers import assert_the_sandbox_leaves_nothing

from pipeline.sandbox import make_sandbox
from pipeline.sandbox.bwrap import sandbox_uid
from pipeline.sources.function_records import FunctionRecord, read_function_records
from pipeline.stages.trace_functions import ReprLimits, TraceSettings, trace_functions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FAST = TraceSettings(max_seconds=1.0, record_timeout_s=3.0)

INDEPENDENT_REPRS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from tracers.reprs.saferepr import Limits, SafeRepr
safe = SafeRepr()
user = SafeRepr(Limits(mode="user"))
out = {}
for line in sys.stdin:
    record = json.loads(line)
    namespace = {"__name__": "__independent__"}
    exec(compile(record["code"], "<independent>", "exec"), namespace)
    args, kwargs = eval("(lambda *a, **k: (a, k))(%s)" % record["input"], namespace)
    value = namespace[record.get("entry", "f")](*args, **kwargs)
    out[record["id"]] = [repr(value), safe(value), user(value) == safe(value)]
print(json.dumps(out))
"""


def trace(records):
    """(traces rows, failures rows, the `trace` counters) of the stage over `records` in bwrap."""
    output = trace_functions(records, make_sandbox("bwrap"), FAST, "test")
    assert set(output.tables) == {"traces", "failures"} and set(output.counters) == {"trace"}
    return output.rows("traces"), output.rows("failures"), output.counters["trace"]


@pytest.fixture(scope="module")
def traced_examples():
    """The bundled examples traced in bwrap."""
    records, failures = read_function_records(str(EXAMPLES / "functions.jsonl"))
    assert failures == []
    rows, failures, counters = trace(records)
    assert (counters.n_in, counters.n_out, sum(counters.dropped.values())) == (len(records), len(rows), len(failures))
    assert counters.events == sum(row["n_events"] for row in rows)
    return records, {row["source_id"]: row for row in rows}, {f["source_id"]: f for f in failures}


def test_entry_return_values_equal_an_independent_interpreter(traced_examples):
    records, rows, _ = traced_examples
    normal = [r for r in records if rows.get(r.id, {}).get("exit") == "normal" and not r.id.startswith("bad_")]
    assert len(normal) >= 50
    stdin = "\n".join(json.dumps({"id": r.id, "code": r.code, "input": r.input, "entry": r.entry}) for r in normal)
    root = str(Path(__file__).resolve().parents[2])
    result = subprocess.run(
        [sys.executable, "-c", INDEPENDENT_REPRS, root],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert result.returncode == 0, result.stderr
    expected = json.loads(result.stdout)
    for record in normal:
        plain, bounded, no_objects = expected[record.id]
        entry_return = [e for e in rows[record.id]["events"] if e["event"] == "return" and e["depth"] == 0][-1]
        # Bounded reprs sort sets and cut long values; every short, set-free value of builtins only is the
        # plain repr (objects of the program's classes are rendered from their state, never by __repr__).
        assert entry_return["arg"] == bounded, record.id
        if no_objects and len(plain) <= 200 and "{" not in plain and "0x" not in plain:
            assert entry_return["arg"] == plain, record.id


def test_first_event_is_the_entry_call(traced_examples):
    records, rows, _ = traced_examples
    for row in rows.values():
        assert row["events"][0]["event"] == "call" and row["events"][0]["depth"] == 0, row["source_id"]
        assert row["n_events"] == len(row["events"])


@pytest.mark.parametrize(
    "record_id, exit_, reason",
    [
        ("bad_infinite_loop", "never", ("max_events", "max_seconds")),
        ("bad_sleep_forever", "never", ("wall_time_kill",)),
        ("bad_huge_alloc", "error", (None,)),
        ("bad_fork_bomb", "error", (None,)),
        ("bad_write_etc", "error", (None,)),
        ("bad_socket", "error", (None,)),
        ("bad_raises", "error", (None,)),
        ("bad_print_flood", "never", ("max_events", "max_seconds")),
        ("bad_repr_raises", "normal", (None,)),
        ("bad_repr_slow", "normal", (None,)),
        ("bad_huge_int", "normal", (None,)),
    ],
)
def test_hostile_records_end_as_traces_with_a_cause(traced_examples, record_id, exit_, reason):
    _, rows, _ = traced_examples
    row = rows[record_id]
    assert row["exit"] == exit_ and row["truncation_reason"] in reason
    if exit_ == "error":
        assert row["events"][-1]["event"] == "exception" and row["events"][-1]["arg"]


def test_hostile_values_are_rendered_without_running_their_code(traced_examples):
    records, rows, _ = traced_examples
    hostile = ("bad_repr_raises", "bad_repr_slow")
    structural = {value for name in hostile for event in rows[name]["events"] for _, value in event["locals"]}
    assert {"Broken(v=4)", "Sluggish(v=4)"} <= structural  # their raising and endless __repr__ never ran
    assert any("digits>" in value for event in rows["bad_huge_int"]["events"] for _, value in event["locals"])
    assert {rows[name]["repr_mode"] for name in hostile} == {"structural"}
    # The per-job `user` mode calls them, each under its alarm.
    settings = replace(FAST, reprs=ReprLimits(mode="user"))
    output = trace_functions([r for r in records if r.id in hostile], make_sandbox("bwrap"), settings, "test")
    user = {row["source_id"]: row for row in output.rows("traces")}
    reprs = {value for row in user.values() for event in row["events"] for _, value in event["locals"]}
    assert "<Broken repr raised>" in reprs and "<Sluggish repr timed out>" in reprs
    assert {row["repr_mode"] for row in user.values()} == {"user"}


def test_the_sandbox_kept_the_host_untouched(traced_examples):
    _, rows, _ = traced_examples
    probe = "/etc/tracegen_probe"  # another job on the machine may write it unsandboxed; this sandbox never does
    assert not os.path.exists(probe) or os.stat(probe).st_uid not in (sandbox_uid(), sandbox_uid(long_lived=True))
    assert rows["bad_write_etc"]["events"][-1]["arg"].startswith("OSError(30")  # read-only file system
    assert (
        "ConnectionRefused" in rows["bad_socket"]["events"][-1]["arg"]
        or "Network is unreachable" in rows["bad_socket"]["events"][-1]["arg"]
    )
    assert_the_sandbox_leaves_nothing()


@pytest.mark.parametrize(
    "record_id, stage, error_type",
    [
        ("bad_syntax", "setup", "SyntaxError"),
        ("bad_input_raises", "input", "ZeroDivisionError"),
        ("bad_missing_entry", "setup", "NameError"),
    ],
)
def test_records_that_cannot_start_are_failure_rows(traced_examples, record_id, stage, error_type):
    _, rows, failures = traced_examples
    assert record_id not in rows
    failure = failures[record_id]
    assert (failure["stage"], failure["error_type"]) == (stage, error_type)
    assert record_id in failure["message"] and failure["input_ref"].endswith(".jsonl:%d" % _line_of(record_id))


def _line_of(record_id: str) -> int:
    with open(EXAMPLES / "functions.jsonl", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if json.loads(line)["id"] == record_id:
                return number
    raise KeyError(record_id)


def test_every_good_record_survives_its_bad_neighbours(traced_examples):
    records, rows, failures = traced_examples
    assert len(rows) + len(failures) == len(records)
    assert all(r.id in rows for r in records if not r.id.startswith("bad_"))


def test_a_home_directory_write_fails_inside_the_sandbox(tmp_path):
    target = Path.home() / "tracegen-probe-should-not-exist"
    code = f"def f():\n    with open({str(target)!r}, 'w') as handle:\n        handle.write('x')\n"
    jsonl = tmp_path / "home.jsonl"
    jsonl.write_text(json.dumps({"id": "home", "code": code, "input": ""}) + "\n")
    records, _ = read_function_records(str(jsonl))
    rows, failures, _ = trace(records)
    assert rows[0]["exit"] == "error" and not target.exists()


def test_the_sandbox_dying_blames_one_record_and_runs_the_rest(tmp_path):
    """A runner killed from outside (here: a tiny memory limit for one record) costs only that record."""
    lines = [
        {"id": "ok1", "code": "def f():\n    return 1\n", "input": ""},
        {
            "id": "kill",
            "code": "import os, signal\n\ndef f():\n    os.kill(os.getppid(), signal.SIGKILL)\n",
            "input": "",
        },
        {"id": "ok2", "code": "def f():\n    return 2\n", "input": ""},
    ]
    jsonl = tmp_path / "kill.jsonl"
    jsonl.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    records, _ = read_function_records(str(jsonl))
    rows, failures, _ = trace(records)
    assert [r["source_id"] for r in rows] == ["ok1", "ok2"]
    assert [(f["source_id"], f["error_type"]) for f in failures] == [("kill", "SandboxFailed")]


def test_a_trace_file_replaced_by_a_link_is_never_followed(tmp_path):
    """Traced code owns its output directory; a planted symlink must not make the host read a host file."""
    code = (
        "import os, sys\n\ndef f():\n    out = sys.argv[-1]\n    for name in os.listdir(out):\n"
        "        if name.endswith('.trace'):\n            path = os.path.join(out, name)\n"
        "            os.remove(path)\n            os.symlink('/etc/passwd', path)\n    return 1\n"
    )
    lines = [
        {"id": "planter", "code": code, "input": ""},
        {"id": "after", "code": "def f():\n    return 2\n", "input": ""},
    ]
    jsonl = tmp_path / "links.jsonl"
    jsonl.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    records, _ = read_function_records(str(jsonl))
    rows, failures, _ = trace(records)
    assert [r["source_id"] for r in rows] == ["after"]
    assert [f["source_id"] for f in failures] == ["planter"]
    assert "root:" not in json.dumps(failures) + json.dumps(rows)


# -- outcome parity (--check-parity) -----------------------------------------------------------------------
PARITY_RECORDS = {
    "tracer_aware": "import sys\n\ndef f(n):\n    return sys.gettrace() is None\n",
    "plain": "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n",
    "raises": "def f(n):\n    raise ValueError('bad', n)\n",
    "repr_ticks": (
        "class Clock:\n"
        "    def __init__(self):\n"
        "        self.ticks = 0\n"
        "\n"
        "    def __repr__(self):\n"
        "        self.ticks += 1\n"
        "        return 'Clock()'\n"
        "\n"
        "def f(n):\n"
        "    clock = Clock()\n"
        "    n += 1\n"
        "    return clock.ticks\n"
    ),
    "endless": "def f(n):\n    while True:\n        n += 1\n",
}


def parity_run(mode: str, check: bool = True):
    records = [FunctionRecord(name, code, "3", "f", f"test:{name}") for name, code in PARITY_RECORDS.items()]
    settings = replace(FAST, reprs=ReprLimits(mode=mode), check_parity=check)
    output = trace_functions(records, make_sandbox("bwrap"), settings, "test")
    failures = {row["source_id"]: row for row in output.rows("failures")}
    return {row["source_id"]: row["perturbed"] for row in output.rows("traces")}, failures


def test_parity_flags_code_that_depends_on_the_tracer():
    perturbed, failures = parity_run("structural")
    assert perturbed == {
        "tracer_aware": True,  # sys.gettrace() is the tracer's hook while traced
        "plain": False,
        "raises": False,  # the same exception (type and args) both ways
        "repr_ticks": False,  # its counting __repr__ never ran
        "endless": None,  # cut by a budget: nothing to compare
    }
    assert set(failures) == {"tracer_aware"}
    failure = failures["tracer_aware"]
    assert (failure["stage"], failure["error_type"]) == ("trace", "OutcomePerturbed")
    assert "normal True" in failure["message"] and "normal False" in failure["message"]


def test_parity_sees_the_perturbation_a_user_repr_causes():
    perturbed, failures = parity_run("user")
    assert perturbed["repr_ticks"] is True and perturbed["plain"] is False
    assert "repr_ticks" in failures


def test_without_parity_nothing_is_compared():
    perturbed, failures = parity_run("structural", check=False)
    assert set(perturbed.values()) == {None} and failures == {}


def test_a_record_s_own_forks_keep_threading_s_after_fork_fixup():
    """The runner forks a record's child without `threading`'s after-fork fixup (the runner has no other
    thread); the record's own forks get it back: a child it forks beside a running thread sees one thread."""
    code = (
        "import os, threading, time\n\nthreading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n\n"
        "def f():\n    before = threading.active_count()\n    pid = os.fork()\n"
        "    if pid == 0:\n        os._exit(threading.active_count())\n"
        "    return before, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
    )
    rows, failures, _ = trace([FunctionRecord("forks_beside_a_thread", code, "", "f", "test:threads")])
    assert failures == [] and (rows[0]["exit"], rows[0]["events"][-1]["arg"]) == ("normal", "(2, 1)")
