"""Issue 10 item 2 in the real bwrap sandbox: a record of a chunk cannot touch another's output, its processes
do not outlive it, and it cannot trace the runner; a record that kills the runner is blamed, no one else.

Each hostile record is followed by ordinary ones, which must come out exactly as traced in process."""

import shutil

import hostile_helpers as helpers
import pytest
from hostile_helpers import assert_ordinary_untouched, beside_ordinary, hostile, trace_chunk

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# Runs `body` in a daemon: double-forked, in its own session, so its parent's exit does not end it.
DAEMON = """
def daemon(body):
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    try:
        body()
    finally:
        os._exit(0)

def spoil_every_trace():
    out = os.path.dirname(os.readlink('/proc/self/fd/%d' % trace_fd()))
    for root in (out, os.path.dirname(out)):
        for name in os.listdir(root):
            path = os.path.join(root, name)
            try:
                if name.endswith(('.trace', '.parity')) and not os.path.samefile(path, '/proc/self/fd/%d' % trace_fd()):
                    with open(path, 'r+b') as handle:
                        handle.truncate(0)
                        handle.write(b'{"type": "header"}\\n{"type": "end", "exit": "normal", "truncated": false}\\n')
            except OSError:
                pass

"""

# Each returns a list of what its attempts gave; every attempt must fail.
ATTACKS = {
    "runner_stdout_rewritten": (
        "def f():\n    tried = []\n    for path in ('/proc/%d/fd/1' % os.getppid(), '/proc/1/fd/1'):\n"
        "        try:\n            open(path, 'wb').write(b'done 000000 0\\n')\n            tried.append('wrote')\n"
        "        except OSError as error:\n            tried.append(type(error).__name__)\n    return tried\n"
    ),
    "runner_ptraced": (
        "import ctypes\n\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n    runner = os.getppid()\n"
        "    attached = libc.ptrace(16, runner, 0, 0)\n    tried = [attached, os.strerror(ctypes.get_errno())]\n"
        "    try:\n        open('/proc/%d/mem' % runner, 'r+b')\n        tried.append('mem opened')\n"
        "    except OSError as error:\n        tried.append(type(error).__name__)\n    return tried\n"
    ),
    "runner_environment_read": (
        "def f():\n    try:\n        return open('/proc/%d/environ' % os.getppid(), 'rb').read()\n"
        "    except OSError as error:\n        return type(error).__name__\n"
    ),
}
ATTACK_RESULTS = {
    "runner_stdout_rewritten": "['PermissionError', 'PermissionError']",
    "runner_ptraced": "[-1, 'Operation not permitted', 'PermissionError']",
    "runner_environment_read": "'PermissionError'",
}

# Each leaves a process behind that would spoil the next records' traces or kill the runner in their time.
LEFT_BEHIND = {
    "daemon_spoils_later_traces": "def f():\n"
    "    daemon(lambda: [spoil_every_trace() or time.sleep(0.002) for _ in range(5000)])\n    return 1\n",
    "daemon_kills_the_runner_later": "def f():\n    runner = os.getppid()\n"
    "    daemon(lambda: time.sleep(0.5) or os.kill(runner, 9))\n    return 1\n",
    "daemon_stops_the_runner_later": "def f():\n    runner = os.getppid()\n"
    "    daemon(lambda: time.sleep(0.5) or os.kill(runner, 19))\n    return 1\n",
    "stopped_child_left_behind": "def f():\n    if os.fork() == 0:\n        os.kill(os.getpid(), 19)\n"
    "        os._exit(0)\n    return 1\n",
    "many_sleepers_left_behind": "def f():\n    for _ in range(40):\n        if os.fork() == 0:\n"
    "            time.sleep(60)\n            os._exit(0)\n    return 1\n",
    "spoils_earlier_traces": "def f():\n    spoil_every_trace()\n    return 1\n",
}


def test_no_record_reaches_the_runner_or_outlives_itself(tmp_path):
    hostiles = [hostile(name, "import time\n" + DAEMON + code) for name, code in {**ATTACKS, **LEFT_BEHIND}.items()]
    records = beside_ordinary(hostiles)
    rows, failures = trace_chunk(records)
    assert failures == {}
    assert_ordinary_untouched(records, rows)
    for name, result in ATTACK_RESULTS.items():
        assert rows[name]["events"][-1]["arg"] == result, name
    assert all(rows[name]["exit"] == "normal" for name in LEFT_BEHIND)
    helpers.assert_the_sandbox_leaves_nothing()


RUNNER_KILLERS = {
    "kills_the_runner": "def f():\n    os.kill(os.getppid(), 9)\n    time.sleep(5)\n",
    "daemon_kills_the_runner_now": "def f():\n    runner = os.getppid()\n    daemon(lambda: os.kill(runner, 9))\n"
    "    time.sleep(5)\n",
}


def test_a_record_that_kills_the_runner_is_blamed_and_no_other(tmp_path):
    records = beside_ordinary([hostile(name, "import time\n" + DAEMON + code) for name, code in RUNNER_KILLERS.items()])
    rows, failures = trace_chunk(records)
    assert_ordinary_untouched(records, rows)
    assert set(failures) == set(RUNNER_KILLERS)
    for name, failure in failures.items():
        assert (failure["stage"], failure["error_type"]) == ("sandbox", "SandboxFailed")
        assert repr(name) in failure["message"] and "the runner died or was stopped" in failure["message"]
    helpers.assert_the_sandbox_leaves_nothing()
