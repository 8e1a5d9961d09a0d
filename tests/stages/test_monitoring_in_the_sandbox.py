"""Issue 13, item 4: the sys.monitoring backend keeps the settrace backend's guarantees in the real sandbox
(bwrap, the function runner's sealed copies, pyenv's CPython 3.12).

Cheap patches made before the trace reach neither backend; tampering while traced ends the trace marked, the
same way under both (settrace and sys.monitoring hooks, gc walks, every sys.monitoring mutator); a record that
reaches for sys.monitoring at import fails at setup; the ordinary records beside them come out the same under
both backends.
"""

from hostile_helpers import beside_ordinary, hostile, trace_chunk
from python_helpers import require_python
from test_the_tracer_resists_cheap_forgery import HONEST_F, TAMPERING, UNSEEN

from tracers.trace.tracer import TRACER_VERSION

MONITORING_UNSEEN = {
    "monitoring_modules_replaced": "import tracers.trace.monitoring as m, tracers.trace.tracer as p\n"
    "import tracers.trace.backends as b\n"
    "m.MonitoringTracer._m_call = lambda *a: None\nm.MonitoringTracer._m_line = lambda *a: None\n"
    "b.tracer_class = lambda backend: p.Tracer\np.Tracer._emit = lambda *a: None\n",
}
MONITORING_TAMPERING = {
    "free_every_tool": (
        "import sys\n\ndef f():\n    for tool in range(6):\n        try:\n"
        "            sys.monitoring.free_tool_id(tool)\n"
        "        except BaseException:\n            pass\n    return 1\n",
        "tampered:sys.monitoring.free_tool_id",
    ),
    "events_off": (
        "import sys\n\ndef f():\n    sys.monitoring.set_events(4, 0)\n    return 1\n",
        "tampered:sys.monitoring.set_events",
    ),
    "callback_fetched": (
        "import sys\n\ndef f():\n    try:\n"
        "        sys.monitoring.register_callback(4, sys.monitoring.events.LINE, None)\n"
        "    except BaseException:\n        pass\n    return 1\n",
        "tampered:sys.monitoring.register_callback",
    ),
}
# The settrace backend's hook lives in the frame; sys.monitoring never reads it (the trace stays whole).
SETTRACE_ONLY = {"frame_trace_cleared"}


def test_both_backends_resist_the_same_tampering_in_the_sandbox():
    python = require_python("3.12")
    unseen = dict(UNSEEN, **MONITORING_UNSEEN)
    tampering = dict(TAMPERING, **MONITORING_TAMPERING)
    records = beside_ordinary(
        [hostile(name, body + HONEST_F) for name, body in unseen.items()]
        + [hostile(name, code) for name, (code, _) in tampering.items()]
        + [hostile("monitoring_at_import", "import sys\nsys.monitoring.use_tool_id(4, 'mine')\n" + HONEST_F)]
    )
    results = {backend: trace_chunk(records, python=python, tracer_backend=backend) for backend in BACKENDS}
    for backend, (rows, failures) in results.items():
        for name in unseen:
            row = rows[name]
            assert (row["exit"], row["truncated"]) == ("normal", False), (backend, name)
            assert row["events"][-1]["arg"] == "[0, 1, 2]" and row["n_events"] > 10, (backend, name)
        for name, (_, reason) in tampering.items():
            row = rows[name]
            if backend == "monitoring" and name in SETTRACE_ONLY:
                assert (row["exit"], row["truncated"]) == ("normal", False), name
                continue
            assert (row["exit"], row["truncated"], row["truncation_reason"]) == ("never", True, reason), (backend, name)
        failure = failures["monitoring_at_import"]
        assert (failure["stage"], failure["error_type"]) == ("setup", "TracerTampered"), failure
        assert "sys.monitoring.use_tool_id" in failure["message"]
    settrace_rows, monitoring_rows = results["settrace"][0], results["monitoring"][0]
    for name, row in monitoring_rows.items():
        if "_then_" in name or name in unseen:  # ordinary records, and hostile ones the patches did not reach
            mine = {k: v for k, v in row.items() if k != "tracer_version"}
            theirs = {k: v for k, v in settrace_rows[name].items() if k != "tracer_version"}
            assert mine == theirs, name
    assert {row["tracer_version"] for row in monitoring_rows.values()} == {TRACER_VERSION + "+monitoring"}


BACKENDS = ("settrace", "monitoring")


# -- repository suites: the real runner (pytest, the plugin, the guard) in bwrap, its venv from 3.12 ----------
SUITE_THAT_REACHES_FOR_THE_TOOLS = {
    "lib/__init__.py": "",
    "lib/code.py": "def double(x):\n    y = x * 2\n    return y\n",
    "tests/test_lib.py": "import sys\n\nfrom lib.code import double\n\n\ndef test_frees_every_tool():\n"
    "    for tool in range(6):\n        try:\n            sys.monitoring.free_tool_id(tool)\n"
    "        except ValueError:\n            pass\n    assert double(2) == 4\n\n\n"
    "def test_after():\n    assert double(3) == 6\n",
}


def traced_repo(tmp_path, name, files, backend):
    import os
    import tempfile

    import repo_fixtures

    from pipeline.sandbox import make_sandbox
    from pipeline.sources.git_cache import GitCache
    from pipeline.sources.repo_manifest import RepoSpec
    from pipeline.stages.repos.suite_run import RepoTraceSettings
    from pipeline.stages.repos.trace import trace_repo

    origin = tmp_path / f"origin-{name}"
    if not origin.exists():
        repo_fixtures.make_repo(origin, files)
    spec = RepoSpec(name=name, url=str(origin), ref="main", timeout_s=240, test_timeout_s=30)
    output = trace_repo(
        spec,
        make_sandbox("bwrap", python=require_python("3.12")),
        GitCache(str(tmp_path / f"git-{backend}")),
        RepoTraceSettings(tracer_backend=backend),
        f"repo-0-{name}",
        pip_cache=os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache"),
    )
    return output.rows("traces"), output.rows("failures")


def test_a_suite_gives_the_same_rows_with_both_backends(tmp_path):
    import repo_fixtures

    rows, failures = {}, {}
    for backend in BACKENDS:
        rows[backend], failures[backend] = traced_repo(tmp_path, "calc", repo_fixtures.CALC, backend)
    assert failures["settrace"] == failures["monitoring"] == []
    assert {row["tracer_version"] for row in rows["monitoring"]} == {TRACER_VERSION + "+monitoring"}
    assert {row["python_version"][:4] for row in rows["monitoring"]} == {"3.12"}
    strip = [{k: v for k, v in row.items() if k != "tracer_version"} for row in rows["settrace"]]
    assert [{k: v for k, v in row.items() if k != "tracer_version"} for row in rows["monitoring"]] == strip
    assert len(strip) > 5 and any(row["exit"] == "error" for row in strip)


def test_a_suite_cannot_free_the_tracers_tools(tmp_path):
    rows, failures = traced_repo(tmp_path, "reaches", SUITE_THAT_REACHES_FOR_THE_TOOLS, "monitoring")
    assert [failure["error_type"] for failure in failures] == ["TracerTampered"], failures
    assert "sys.monitoring.free_tool_id" in failures[0]["message"]
    traced_tests = {row["test_id"] for row in rows}  # refused, so both tests are traced whole
    assert traced_tests == {"tests/test_lib.py::test_frees_every_tool", "tests/test_lib.py::test_after"}
    assert all(not row["truncated"] for row in rows)
