"""Issue 10 item 5 in the real bwrap sandbox: a record's scratch is a size-capped filesystem, and its wall
clock holds whatever it does to its own processes or to the runner's; the records beside it are traced as
in process, and a chunk whose runner was stopped keeps what it finished."""

import shutil
import time

import pytest
from hostile_helpers import (
    FAST,
    assert_ordinary_untouched,
    assert_the_sandbox_leaves_nothing,
    beside_ordinary,
    hostile,
    trace_chunk,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

FILL = "def f():\n    written = 0\n    for n in range(1000):\n        try:\n"
FILLERS = {
    "fills_its_cwd": FILL + "            with open('fill-%d' % n, 'wb') as h:\n"
    "                written += h.write(b'x' * (4 << 20))\n"
    "        except OSError:\n            pass\n    return written\n",
    "fills_tmp_in_a_daemon": FILL + "            if n == 0 and os.fork() == 0:\n                os.setsid()\n"
    "                while True:\n                    with open('/tmp/d-%d' % time.monotonic_ns(), 'wb') as h:\n"
    "                        h.write(b'y' * (1 << 20))\n            time.sleep(0.01)\n"
    "        except OSError:\n            pass\n    return written\n",
    # Compiled under another file name, so its 2000 writes are not traced (no event budget ends it first).
    "fills_locked_directories_with_small_files": "UNTRACED = compile(%r, 'untraced', 'exec')\n\n"
    "def f():\n    exec(UNTRACED, {})\n    return 1\n"
    % (
        "import os\nfor n in range(20):\n    path = os.path.expanduser('~/d%d/e' % n)\n    os.makedirs(path)\n"
        "    for m in range(100):\n        try:\n            with open('%s/%d' % (path, m), 'wb') as h:\n"
        "                h.write(b'z' * (1 << 16))\n        except OSError:\n            pass\n    os.chmod(path, 0)\n"
    ),
}

STOPPERS = {
    "stops_itself": "import signal\n\ndef f():\n    os.kill(os.getpid(), signal.SIGSTOP)\n    return 1\n",
    "stops_its_process_group": "import signal\n\ndef f():\n    os.killpg(0, signal.SIGSTOP)\n    return 1\n",
    "forks_stopped_children": "import signal\n\ndef f():\n    for _ in range(8):\n        if os.fork() == 0:\n"
    "            os.kill(os.getpid(), signal.SIGSTOP)\n    os.kill(os.getpid(), signal.SIGSTOP)\n",
}


def test_a_record_filling_its_scratch_is_stopped_and_counted():
    records = beside_ordinary([hostile(name, "import time\n" + code) for name, code in FILLERS.items()])
    rows, failures = trace_chunk(records)
    assert_ordinary_untouched(records, rows)
    hostiles = {name: failures.get(name) or rows[name] for name in FILLERS}
    for name, failure in hostiles.items():
        assert failure.get("error_type") == "ScratchLimitExceeded", (name, failure)
        assert repr(name) in failure["message"] and "scratch filesystem" in failure["message"]
    assert_the_sandbox_leaves_nothing()


def test_a_record_that_stops_itself_ends_at_its_own_wall_clock():
    records = beside_ordinary([hostile(name, code) for name, code in STOPPERS.items()])
    start = time.monotonic()
    rows, failures = trace_chunk(records)
    assert time.monotonic() - start < len(STOPPERS) * (FAST.record_timeout_s + 1) + 5
    assert failures == {}
    assert_ordinary_untouched(records, rows)
    for name in STOPPERS:
        assert (rows[name]["exit"], rows[name]["truncation_reason"]) == ("never", "wall_time_kill"), name


def test_a_stopped_runner_is_killed_from_outside_and_costs_only_its_record():
    """Its record's wall clock is 1.5 s plus the runner's 5 s margin: past it the sandbox is killed."""
    stopper = hostile("stops_the_runner", "import signal\n\ndef f():\n    os.kill(os.getppid(), signal.SIGSTOP)\n")
    records = beside_ordinary([stopper])
    records = records[1:2] + records[:1] + records[2:]  # one finished record before it
    rows, failures = trace_chunk(records, record_timeout_s=1.5)
    assert_ordinary_untouched(records, rows)
    assert set(failures) == {"stops_the_runner"}
    failure = failures["stops_the_runner"]
    assert failure["error_type"] == "SandboxFailed" and "wall-clock limit of 6.5s exceeded" in failure["message"]
    assert_the_sandbox_leaves_nothing()
