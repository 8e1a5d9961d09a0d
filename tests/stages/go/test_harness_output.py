"""The harness's output is checked strictly: shapes, ranges, paths; traces are read without following links."""

import json
import os

import pytest

from pipeline.engine.config import settings_dict
from pipeline.stages.go.harness_output import HarnessOutputError, canonical_ids, parse_harness_output, renumber
from pipeline.stages.go.runs import GoSettings, is_complete, read_trace

WORK = "/scratch/work"


def event(index: int, goroutine: int = 0, gpath: str = "0", **extra) -> dict:
    values = {
        "index": index,
        "goroutine": goroutine,
        "gpath": gpath,
        "event": "GoSched",
        "reason": "runtime.Gosched",
        "peer": -1,
        "function": "main.main",
        "file": "main.go",
        "line": 3,
        "time_ns": index * 10,
        "category": "",
        "message": "",
        "object": "",
        "object_state": "",
    }
    return values | extra


def line(run_index: int = 0, **extra) -> dict:
    values = {
        "run_index": run_index,
        "mode": "main",
        "status": "ok",
        "exit_code": 0,
        "duration_ms": 3,
        "gomaxprocs": None,
        "trace_file": f"{WORK}/run-{run_index}.trace",
        "trace_error": "",
        "stderr_tail": "",
        "stdout_tail": "",
        "events": [event(0), event(1)],
        "truncated": False,
        "goroutines": [
            {"goroutine": 0, "gpath": "0", "start_function": "main.main", "final_state": "Running", "final_reason": ""}
        ],
        "leaked": [],
        "generations": 1,
        "instrumentation": "rewritten",
        "rewrite_error": "",
    }
    return values | extra


LEAKED = {"goroutine": 0, "gpath": "0", "state": "blocked(select)", "reason": "select"}


def output(*lines: dict) -> bytes:
    return b"".join(json.dumps(value).encode() + b"\n" for value in lines)


def parse(data: bytes, finished: bool = True, max_events: int = 100):
    return parse_harness_output(data, work=WORK, max_events=max_events, finished=finished)


def test_good_output_parses():
    runs = parse(output(line(0), line(1)))
    assert [r["run_index"] for r in runs] == [0, 1]


def test_user_annotations_parse_and_keep_their_text():
    annotated = [event(0, event="UserLog", reason="", category="phase", message="start"), event(1)]
    [run] = parse(output(line(0, events=annotated)))
    ids = canonical_ids(["0"])
    events, _ = renumber(run["events"], run["goroutines"], ids)
    assert (events[0]["event"], events[0]["category"], events[0]["message"]) == ("UserLog", "phase", "start")


def test_object_events_parse_and_keep_their_object():
    events = [
        event(0, event="ObjectOp", reason="send", object="chan@main.go:3", object_state="len 1/2"),
        event(
            1, event="GoBlock", reason="chan send", object="chan@main.go:3", object_state="send, len 2/2, receivers 0"
        ),
    ]
    [run] = parse(output(line(0, events=events, instrumentation="fallback", rewrite_error="x") | {"events": events}))
    renumbered, _ = renumber(run["events"], run["goroutines"], canonical_ids(["0"]))
    assert [(e["object"], e["object_state"]) for e in renumbered] == [
        ("chan@main.go:3", "len 1/2"),
        ("chan@main.go:3", "send, len 2/2, receivers 0"),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        dict(status="exploded"),
        dict(mode="lib"),
        dict(exit_code=True),  # a bool is not an int
        dict(duration_ms=-1),
        dict(trace_file="/etc/shadow"),  # only run-<i>.trace in the scratch dir
        dict(trace_file=f"{WORK}/run-1.trace"),  # another run's trace
        dict(events=[event(1)]),  # index must be the position
        dict(events=[event(0, event="GoTeleport")]),
        dict(events=[event(0, category="phase")]),  # only user annotations carry a category or message
        dict(events=[event(0, message=7)]),
        dict(events=[event(0, gpath="0;rm")]),
        dict(events=[event(0, line=-3)]),
        dict(events=[event(0, peer=7)]),  # no such goroutine in the run
        dict(events=[event(0), event(1, goroutine=0, gpath="0.1")]),  # one id, two paths
        dict(events=[event(0) | {"extra": 1}]),
        dict(generations=-1),
        dict(status="leak"),  # a leak names its goroutines
        dict(leaked=[LEAKED]),  # and only a leak does
        dict(status="leak", leaked=[LEAKED | {"goroutine": 5}]),  # not the run's id
        dict(status="leak", leaked=[LEAKED | {"extra": 1}]),
        dict(status="leak", leaked=[LEAKED | {"state": "asleep"}]),  # created, runnable, running, syscall, blocked()
        dict(status="leak", leaked=[LEAKED | {"state": "blocked(sync)"}]),  # the reason is the blocked one's
        dict(status="leak", leaked=[LEAKED | {"state": "running"}]),  # only a blocked one has a reason
        dict(events=[event(0, function="x" * 70_000)]),
        dict(goroutines=[{"goroutine": 0}]),
        dict(run_index=-1),  # -1 only for build_error
        dict(instrumentation="patched"),
        dict(instrumentation="fallback"),  # a fallback says why
        dict(rewrite_error="boom"),  # and only a fallback does
        dict(events=[event(0, object="chan@main.go:3")]),  # only ObjectOp, GoBlock, GoUnblock name an object
    ],
)
def test_malformed_lines_are_rejected(bad):
    with pytest.raises(HarnessOutputError):
        parse(output(line(0) | bad))


def test_missing_and_extra_keys_and_duplicates_are_rejected():
    value = line(0)
    del value["truncated"]
    with pytest.raises(HarnessOutputError):
        parse(output(value))
    with pytest.raises(HarnessOutputError):
        parse(output(line(0) | {"surprise": 1}))
    with pytest.raises(HarnessOutputError):
        parse(b'{"run_index": 0, "run_index": 0}\n')
    with pytest.raises(HarnessOutputError):
        parse(b"not json\n")


def test_event_cap_is_enforced():
    with pytest.raises(HarnessOutputError):
        parse(output(line(0)), max_events=1)


def test_run_indices_must_count_up():
    with pytest.raises(HarnessOutputError):
        parse(output(line(0), line(2)))
    build = line(-1, status="build_error", events=[], goroutines=[], trace_file="")
    assert parse(output(build))[0]["status"] == "build_error"


def test_a_cut_off_last_line_is_dropped_only_when_the_harness_was_killed():
    data = output(line(0)) + b'{"run_index": 1, "mo'
    assert len(parse(data, finished=False)) == 1
    with pytest.raises(HarnessOutputError):
        parse(data, finished=True)


def test_canonical_ids_are_breadth_first_and_renumbering_maps_peers():
    assert canonical_ids(["0.2.1", "0.10", "0", "0.2", "1", "0.1"]) == {
        "0": 0,
        "1": 1,
        "0.1": 2,
        "0.2": 3,
        "0.10": 4,
        "0.2.1": 5,
    }
    events = [event(0, goroutine=1, gpath="0.2", event="GoCreate", reason="", peer=0), event(1)]
    goroutines = [
        {"goroutine": 0, "gpath": "0", "start_function": "main.main", "final_state": "Running", "final_reason": ""}
    ]
    ids = {"0": 0, "0.1": 1, "0.2": 2}
    new_events, new_goroutines = renumber(events, goroutines, ids)
    assert new_events[0]["goroutine"] == 2 and new_events[0]["peer"] == 0
    assert new_goroutines[0]["goroutine"] == 0


def test_a_leak_parses_with_its_goroutines():
    [run] = parse(output(line(0, status="leak", leaked=[LEAKED])))
    assert run["status"] == "leak" and run["leaked"] == [LEAKED]
    for state in ("created", "runnable", "running", "syscall"):
        [run] = parse(output(line(0, status="leak", leaked=[LEAKED | {"state": state, "reason": ""}])))
        assert run["leaked"][0]["state"] == state


def test_completeness_rules():
    ok = line(0)
    assert is_complete(ok)
    assert is_complete(line(0, status="leak", leaked=[LEAKED]))
    assert not is_complete(line(0, generations=0, events=[]))  # a header-only trace: nothing is known
    assert not is_complete(line(0, truncated=True))
    assert not is_complete(line(0, trace_file=""))
    assert not is_complete(line(0, status="timeout", exit_code=124))
    assert is_complete(line(0, status="deadlock", exit_code=124))
    assert not is_complete(line(0, status="exit_error", exit_code=2, stderr_tail="fatal error: concurrent map writes"))
    assert is_complete(line(0, status="exit_error", mode="test", exit_code=1, stdout_tail="--- FAIL: TestX"))
    assert not is_complete(line(0, status="exit_error", exit_code=3))  # os.Exit: the trace was not flushed


def test_read_trace_refuses_links_and_special_files(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"host secret")
    link = tmp_path / "run-0.trace"
    link.symlink_to(secret)
    assert read_trace(str(link), 1 << 20) == (None, None)
    fifo = tmp_path / "run-1.trace"
    os.mkfifo(fifo)
    assert read_trace(str(fifo), 1 << 20) == (None, None)  # and does not hang
    real = tmp_path / "run-2.trace"
    real.write_bytes(b"x" * 100)
    assert read_trace(str(real), 1 << 20) == (100, b"x" * 100)
    assert read_trace(str(real), 10) == (100, None)
    assert read_trace(str(tmp_path / "missing"), 10) == (None, None)


def test_settings_validate_and_hash_only_what_decides_rows():
    with pytest.raises(ValueError):
        GoSettings(runs=0)
    with pytest.raises(ValueError):
        GoSettings(gomaxprocs=(0,))
    with pytest.raises(ValueError):
        GoSettings(test_regex="(")
    assert settings_dict(GoSettings(cache_dir="/elsewhere")) == settings_dict(GoSettings())
    assert settings_dict(GoSettings(warm_imports=("fmt",))) == settings_dict(GoSettings())
    assert settings_dict(GoSettings(runs=7)) != settings_dict(GoSettings())
    assert settings_dict(GoSettings(rewrite=False)) != settings_dict(GoSettings())  # the rows differ
    assert GoSettings(race=True).limits().memory_bytes > GoSettings().limits().memory_bytes
