"""What untrusted code can and cannot do in every isolating backend (bwrap, docker), and that the host survives.

Each test runs once per backend (the `backend` fixture). Where the backends differ by construction (a
cgroup's OOM kill against RLIMIT_AS, Docker's seccomp filter, bwrap's extra PWD), the test says so per
backend; what only one backend has is tested in test_bwrap.py / test_docker.py.
"""

import dataclasses
import os
import select
import subprocess
import time
import uuid

import pytest
from sandbox_helpers import CONNECT, proc_status, wait_for_no_processes

from pipeline.sandbox import Bind
from pipeline.sandbox.bwrap import sandbox_uid
from pipeline.sandbox.docker import DEFAULT_PATH

FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"


def limits(sandbox, **changes):
    return dataclasses.replace(sandbox.limits, **changes)


def python(sandbox, code: str, *args: str, **kwargs):
    return sandbox.run([sandbox.python, "-c", code, *args], **kwargs)


def uid_of(sandbox) -> int:
    """The uid the sandboxed processes run as."""
    if sandbox.name == "docker":
        return sandbox.uid()
    return sandbox_uid() if os.geteuid() == 0 else 65534


def test_process_is_unprivileged_inside(backend):
    result = backend.run(["/bin/cat", "/proc/self/status"])
    assert result.ok, result.describe()
    status = proc_status(result.stdout_tail)
    assert all(uid != "0" for uid in status["Uid"].split())
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1"
    if backend.name == "docker":
        assert status["Seccomp"] == "2"  # the engine's default filter is on (bwrap sets none)


def test_environment_is_what_is_given_and_the_hosts_does_not_leak(backend, monkeypatch):
    monkeypatch.setenv("TRACEGEN_TEST_SECRET", "leaked")
    result = backend.run(["/usr/bin/env"], env={"GIVEN": "a b=c"})
    assert result.ok, result.describe()
    seen = dict(line.split("=", 1) for line in result.stdout_tail.decode().splitlines())
    assert seen.pop("GIVEN") == "a b=c" and seen.pop("HOME") == "/tmp" and "PATH" in seen
    if backend.name == "docker":
        assert seen == {"PATH": DEFAULT_PATH}
    else:
        assert set(seen) <= {"PATH", "PWD"}  # bwrap sets PWD
    init = python(
        backend,
        "import sys\ntry:\n    print(open('/proc/1/environ').read())\n"
        "except OSError as e:\n    print(type(e).__name__)",
    )
    assert b"leaked" not in init.stdout_tail and b"TRACEGEN_TEST_SECRET" not in init.stdout_tail


def test_exit_status_and_stderr_tail_come_back(backend):
    result = python(backend, "import sys; print('out'); sys.stderr.write('x' * 10000 + 'boom'); sys.exit(3)")
    assert (result.returncode, result.cause, result.ok) == (3, None, False)
    assert result.stdout_tail == b"out\n"
    assert len(result.stderr_tail) == backend.limits.output_tail_bytes
    assert result.stderr_tail.endswith(b"boom")


def test_missing_command_is_a_result_not_an_exception(backend):
    result = backend.run(["/no/such/program"])
    assert result.returncode == 127 and b"No such file" in result.stderr_tail


def test_writable_bind_receives_a_file_and_readonly_bind_refuses(backend, tmp_path):
    out, inp = tmp_path / "out", tmp_path / "in"
    out.mkdir()
    inp.mkdir()
    (inp / "data").write_text("given")
    code = (
        f"data = open({str(inp / 'data')!r}).read()\n"
        f"open({str(out / 'result')!r}, 'w').write(data + ' and written')\n"
        f"try:\n    open({str(inp / 'new')!r}, 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n"
    )
    result = python(backend, code, binds=[Bind(str(inp)), Bind(str(out), writable=True)], cwd=str(out))
    assert result.ok, result.describe()
    assert (out / "result").read_text() == "given and written"
    assert not (inp / "new").exists() and result.stdout_tail.strip() == b"OSError"  # EROFS


@pytest.mark.parametrize("path", ["/etc/passwd-new", "/root/x", "/usr/lib/x", "/x"])
def test_writes_outside_binds_and_tmp_fail(backend, path):
    result = python(backend, f"open({path!r}, 'w')")
    assert result.returncode == 1 and (
        b"Read-only file system" in result.stderr_tail or b"Permission denied" in result.stderr_tail
    ), result.describe()


def test_tmp_is_private_and_writable(backend):
    name = f"/tmp/tracegen-test-{uuid.uuid4().hex}"
    result = python(backend, f"open({name!r}, 'w').write('ok')")
    assert result.ok, result.describe()
    assert not os.path.exists(name)


def test_programs_built_in_tmp_can_run(backend):
    """`go run`, `go test` and pip builds execute what they just wrote to /tmp."""
    result = backend.run(["/bin/sh", "-c", "cp /bin/echo /tmp/built && /tmp/built ran"])
    assert result.ok and result.stdout_tail == b"ran\n", result.describe()


def test_infinite_loop_is_killed_at_the_wall_clock(backend):
    result = python(backend, "while True: pass", limits=limits(backend, wall_s=1.5))
    assert result.cause == "wall-clock limit of 1.5s exceeded"
    assert 1.5 <= result.wall_s < 10 and not result.ok


def test_memory_bomb_ends_as_a_failure(backend):
    code = "b = []\nwhile True: b.append(bytearray(16 << 20))"
    result = python(backend, code, limits=limits(backend, memory_bytes=128 << 20, wall_s=10))
    assert not result.ok and "wall-clock" not in (result.cause or ""), result.describe()
    if backend.name == "docker":  # the cgroup's OOM killer ends it, and the cause says so
        assert result.cause and result.cause.startswith("out of memory"), result.describe()
    else:  # RLIMIT_AS: the allocation fails inside
        assert result.returncode == 1 and b"MemoryError" in result.stderr_tail, result.describe()


def test_process_limit_bounds_the_process_count(backend):
    if backend.name == "bwrap":
        wait_for_no_processes(uid_of(backend), 5)  # RLIMIT_NPROC counts every process of the uid
    code = (
        "import subprocess\nkids = []\ntry:\n    for _ in range(100):\n"
        "        kids.append(subprocess.Popen(['/bin/sleep', '5']))\nexcept OSError:\n    pass\n"
        "print(len(kids))\nfor kid in kids: kid.kill()"
    )
    result = python(backend, code, limits=limits(backend, nproc=16))
    assert result.ok, result.describe()
    assert 0 < int(result.stdout_tail) < 16


def test_fork_bomb_ends_and_the_host_survives(backend):
    result = python(backend, FORK_BOMB, limits=limits(backend, wall_s=3.0, nproc=32))
    assert not result.ok and result.cause is not None and result.wall_s < 20
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    # The container's removal takes its processes along; bwrap's killed group may need a moment to go.
    grace = {"docker": 0, "bwrap": 5}[backend.name]
    assert wait_for_no_processes(uid_of(backend), grace) == [], "the bomb's processes outlived the sandbox"


def test_a_run_right_after_a_fork_bomb_works(backend):
    python(backend, FORK_BOMB, limits=limits(backend, wall_s=2.0, nproc=32))
    result = backend.run(["/bin/true"], limits=limits(backend, nproc=8))
    assert result.ok, result.describe()


@pytest.mark.parametrize("writer", ["python", "head"])
def test_one_gigabyte_of_stdout_is_capped(backend, writer):
    argv = {
        "python": [backend.python, "-c", "import sys\nfor _ in range(1024): sys.stdout.buffer.write(b'y' * (1 << 20))"],
        "head": ["/usr/bin/head", "-c", str(1 << 30), "/dev/zero"],
    }[writer]
    start = time.monotonic()
    result = backend.run(argv)
    assert time.monotonic() - start < 20 and not result.ok
    assert len(result.stdout_tail) == backend.limits.output_tail_bytes
    if backend.name == "docker":
        assert result.cause == f"output limit of {backend.limits.file_bytes} bytes exceeded"
    # bwrap: the writer's SIGXFSZ reaches us as bwrap's exit status (128 + 25, or 1 from Python's
    # "File too large"), so no cause is named: the run still ends as a failure


def test_no_network_reaches_nothing(backend, host_listener):
    result = python(backend, CONNECT, str(host_listener), "127.0.0.1", "172.17.0.1", "192.0.2.1")
    assert result.ok, result.describe()
    assert result.stdout_tail.split() == [
        b"127.0.0.1",
        b"ConnectionRefusedError",
        b"172.17.0.1",
        b"OSError",
        b"192.0.2.1",
        b"OSError",
    ]


def test_a_started_sandbox_stopped_twice_ends_once(backend):
    """`stop` again (a caller's cleanup after an error path already stopped it) gives the first result:
    nothing is closed, killed or released twice."""
    process = backend.start([backend.python, "-c", "import sys, time; sys.stderr.write('up\\n'); time.sleep(60)"])
    first = process.stop("stopped by the test")
    assert process.stop() is first
    assert first.cause == "stopped by the test" and first.returncode != 0
    assert process.stop("another cause").cause == "stopped by the test"


def test_a_started_sandbox_runs_apart_from_one_shot_commands(backend):
    """A long-lived sandbox (a warm runner) has its own uid, so a one-shot command beside it, whose end
    waits until its uid has no process left, never waits for the long-lived one's processes."""
    if os.geteuid() != 0:
        pytest.skip("the sandbox uids are set only as root")
    code = "import os, sys, time; print(os.getuid(), flush=True); time.sleep(60)"
    process = backend.start([backend.python, "-c", code])
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)  # it runs before the one-shot starts
        long_lived = int(os.read(process.stdout, 100).split()[0]) if ready else None
        one_shot = python(backend, "import os; print(os.getuid())")
    finally:
        process.stop("stopped by the test")
    assert long_lived == sandbox_uid(long_lived=True)
    assert int(one_shot.stdout_tail) == uid_of(backend) != sandbox_uid(long_lived=True)
