"""Memory as a resource (pipeline/engine/memory.py): a unit that outgrows its memory ends failed and named, in
bounded time and attempts, and the job's other units are written.

Every watch here runs in a Ray worker or a subprocess of its own, never in the pytest process: an asynchronous
exception must never be able to land in the test runner.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.memory import check_memory_settings

ROOT = Path(__file__).resolve().parents[2]

JOB = """
import json, os, sys, time, uuid
from dataclasses import dataclass
from typing import ClassVar

from pipeline.engine import job
from pipeline.engine.config import KindConfig
from pipeline.engine.executor import Unit
from pipeline.engine.memory import MB, UnitMemory
from pipeline.engine.stats import StageOutput

@dataclass(frozen=True)
class MemoryConfig(KindConfig):
    kind: ClassVar[str] = "memory-test"

def produce(payload, unit_id, sink=None):
    behaviour, attempts = payload
    with open(os.path.join(attempts, f"{unit_id}-{uuid.uuid4().hex}"), "w"):
        pass
    if behaviour == "grow":  # without bound, in Python: stopped at its next bytecode
        held = []
        while True:
            held.append(bytearray(10 * MB))
    if behaviour == "stuck":  # one big allocation held, then C code that never returns to the interpreter
        held = b"x" * (600 * MB)
        time.sleep(600)
    row = {"unit_id": unit_id, "source_id": behaviour, "duplicate_of": "kept", "similarity": 1.0, "input_ref": "x"}
    return StageOutput({"duplicates": [row]})

attempts, out = sys.argv[1], sys.argv[2]
behaviours = ["ok", "grow", "ok", "stuck", "ok"]
units = [Unit(i, f"u-{i}-{b}", (b, attempts)) for i, b in enumerate(behaviours)]
started = time.monotonic()
try:
    job.execute_job(units, produce, out, MemoryConfig(), workers=2, memory=UnitMemory(400, "fewer rows"),
                    oom_retries=int(sys.argv[3]))
    error = None
except job.JobIncomplete as incomplete:
    error = str(incomplete)
print(json.dumps({"error": error, "seconds": time.monotonic() - started}))
"""


@pytest.fixture(scope="module")
def bounded_job(tmp_path_factory):
    """A job of five units, two of which outgrow their 400 MB (one in Python, one in C), 2 OOM retries."""
    base = tmp_path_factory.mktemp("memory")
    attempts, out = base / "attempts", base / "out"
    attempts.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(JOB), str(attempts), str(out), "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # the bound: without it, Ray would retry the units forever
        cwd=base,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result, attempts, out


def test_a_unit_that_allocates_without_bound_ends_failed_and_named(bounded_job):
    result, _, out = bounded_job
    assert result["error"] is not None, "the job should end incomplete"
    manifest = json.loads((out / "manifest.json").read_text())
    failed = manifest["failed_units"]
    assert set(failed) == {"u-1-grow", "u-3-stuck"}
    grow = failed["u-1-grow"]
    assert grow.startswith("MemoryLimitExceeded: unit u-1-grow reached ")
    assert "over its limit of 400 MB" in grow and "--task-memory-mb" in grow
    assert "make units smaller (fewer rows)" in grow
    assert int(grow.split(" reached ")[1].split(" MB")[0]) > 400
    assert "u-1-grow: MemoryLimitExceeded" in result["error"]  # the job's message says why, not only which


def test_a_unit_stuck_in_c_past_its_limit_has_its_worker_ended_and_is_named(bounded_job):
    result, _, out = bounded_job
    stuck = json.loads((out / "manifest.json").read_text())["failed_units"]["u-3-stuck"]
    assert stuck.startswith("MemoryLimitExceeded: unit u-3-stuck reached "), stuck
    assert "its worker was ended" in stuck
    assert int(stuck.split(" reached ")[1].split(" MB")[0]) >= 600


def test_a_unit_stopped_for_memory_runs_once_plus_its_oom_retries(bounded_job):
    _, attempts, out = bounded_job
    made = sorted(path.name.rsplit("-", 1)[0] for path in attempts.iterdir())
    assert made.count("u-1-grow") == 3 and made.count("u-3-stuck") == 3  # 1 + --oom-retries 2
    assert all(made.count(f"u-{i}-ok") == 1 for i in (0, 2, 4))
    failed = json.loads((out / "manifest.json").read_text())["failed_units"]
    assert "stopped for memory in 3 of 3 attempts (--oom-retries 2)" in failed["u-1-grow"]


def test_the_other_units_are_written_with_their_peak_memory(bounded_job):
    _, _, out = bounded_job
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tables"]["duplicates"]["rows"] == 3
    records = [UnitRecord.from_json(path.read_text()) for path in sorted((out / "_units").glob("*.json"))]
    assert [record.unit_id for record in records] == ["u-0-ok", "u-2-ok", "u-4-ok"]
    for record in records:
        assert record.peak_rss_bytes is not None and 10 << 20 < record.peak_rss_bytes < 400 << 20


def test_a_record_without_peak_memory_still_loads():
    old = '{"config_hash": "c", "counters": {}, "fingerprint": "", "shards": {}, "unit": 0, "unit_id": "u"}'
    record = UnitRecord.from_json(old)
    assert record.peak_rss_bytes is None and record.to_json() == old


@pytest.mark.parametrize(
    ("memory", "retries", "option"),
    [(0, 2, "--task-memory-mb"), (1.5, 2, "--task-memory-mb"), (None, -1, "--oom-retries"), (64, "2", "--oom-retries")],
)
def test_memory_settings_are_checked_with_the_option_named(memory, retries, option):
    with pytest.raises(ValueError, match=option):
        check_memory_settings(memory, retries)


WATCH = """
import threading, time
from pipeline.engine.memory import MB, MemoryLimitExceeded, call_within_memory

def grow(_):
    held = []
    while True:
        held.append(bytearray(10 * MB))

for i in range(3):
    try:
        call_within_memory(grow, None, 300 * MB, "u-grow")
    except MemoryLimitExceeded as error:
        assert error.unit_id == "u-grow" and error.reached_bytes > 300 * MB, error
    else:
        raise AssertionError("not stopped")
# Units that end while the watch samples as often as it can: no stop arrives after one ends.
for i in range(300):
    assert call_within_memory(lambda x: x + 1, i, 300 * MB, "u-ok", interval_s=0.0005) == i + 1
deadline = time.monotonic() + 1.0
while time.monotonic() < deadline:
    pass
assert threading.active_count() == 1, threading.enumerate()
print("ok")
"""


def test_the_watch_stops_a_unit_and_leaves_nothing_behind_once_disarmed(tmp_path):
    """In a subprocess: stops land in the unit, the unit's memory is freed, and after disarm nothing arrives."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WATCH)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_cli_refuses_a_bad_memory_setting_before_ray_starts(tmp_path, capsys):
    from pipeline.cli import main

    argv = ["trace-functions", "--input", str(ROOT / "examples" / "functions.jsonl"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--sandbox", "process", "--task-memory-mb", "10"]) == 2
    assert "--task-memory-mb must be an int >= 64" in capsys.readouterr().err
    assert main([*argv, "--sandbox", "process", "--oom-retries", "-1"]) == 2
    assert "--oom-retries must be an int >= 0" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
