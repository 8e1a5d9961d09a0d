"""The bwrap backend's isolation: what untrusted code can and cannot do in it, and that the host survives."""

import dataclasses
import os
import shutil
import subprocess
import time
import uuid

import pytest

from pipeline.sandbox import Bind, SandboxLimits, make_sandbox
from pipeline.sandbox.bwrap import sandbox_uid
from sandbox_helpers import CONNECT, proc_status, wait_for_no_processes

if shutil.which("bwrap") is None and os.environ.get("CI") != "true":
    pytest.skip("bubblewrap is not installed", allow_module_level=True)

LIMITS = SandboxLimits(wall_s=20.0, memory_bytes=256 << 20, cpu_s=30, nproc=64, file_bytes=16 << 20,
                       output_tail_bytes=4096)


@pytest.fixture(scope="module")
def sandbox():
    return make_sandbox("bwrap", LIMITS)


def python(sandbox, code: str, *args: str, **kwargs):
    return sandbox.run([sandbox.python, "-c", code, *args], **kwargs)


def uid_of(sandbox) -> int:
    return sandbox_uid() if os.geteuid() == 0 else 65534


def test_process_is_unprivileged_inside(sandbox):
    result = sandbox.run(["/bin/cat", "/proc/self/status"])
    assert result.ok, result.describe()
    status = proc_status(result.stdout_tail)
    assert all(uid != "0" for uid in status["Uid"].split())
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1"


def test_host_environment_does_not_leak(sandbox, monkeypatch):
    monkeypatch.setenv("TRACEGEN_TEST_SECRET", "leaked")
    result = sandbox.run(["/usr/bin/env"], env={"GIVEN": "a b=c"})
    seen = dict(line.split("=", 1) for line in result.stdout_tail.decode().splitlines())
    assert seen.pop("GIVEN") == "a b=c" and seen.pop("HOME") == "/tmp" and "PATH" in seen
    assert set(seen) <= {"PATH", "PWD"}
    init = python(sandbox, "import sys\ntry:\n    print(open('/proc/1/environ').read())\n"
                           "except OSError as e:\n    print(type(e).__name__)")
    assert b"leaked" not in init.stdout_tail and b"TRACEGEN_TEST_SECRET" not in init.stdout_tail


def test_exit_status_and_stderr_tail_come_back(sandbox):
    result = python(sandbox, "import sys; print('out'); sys.stderr.write('x' * 10000 + 'boom'); sys.exit(3)")
    assert (result.returncode, result.cause, result.ok) == (3, None, False)
    assert result.stdout_tail == b"out\n"
    assert len(result.stderr_tail) == LIMITS.output_tail_bytes and result.stderr_tail.endswith(b"boom")


def test_writable_bind_receives_a_file_and_readonly_bind_refuses(sandbox, tmp_path):
    out, inp = tmp_path / "out", tmp_path / "in"
    out.mkdir()
    inp.mkdir()
    (inp / "data").write_text("given")
    code = (f"data = open({str(inp / 'data')!r}).read()\n"
            f"open({str(out / 'result')!r}, 'w').write(data + ' and written')\n"
            f"try:\n    open({str(inp / 'new')!r}, 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n")
    result = python(sandbox, code, binds=[Bind(str(inp)), Bind(str(out), writable=True)], cwd=str(out))
    assert result.ok, result.describe()
    assert (out / "result").read_text() == "given and written"
    assert not (inp / "new").exists() and result.stdout_tail.strip() in (b"OSError", b"PermissionError")


@pytest.mark.parametrize("path", ["/etc/passwd-new", "/root/x", "/usr/lib/x", "/x"])
def test_writes_outside_binds_and_tmp_fail(sandbox, path):
    result = python(sandbox, f"open({path!r}, 'w')")
    assert result.returncode == 1 and b"Error" in result.stderr_tail, result.describe()


def test_tmp_is_private_and_writable(sandbox):
    name = f"/tmp/tracegen-test-{uuid.uuid4().hex}"
    result = python(sandbox, f"open({name!r}, 'w').write('ok')")
    assert result.ok, result.describe()
    assert not os.path.exists(name)


def test_infinite_loop_is_killed_at_the_wall_clock(sandbox):
    result = python(sandbox, "while True: pass", limits=dataclasses.replace(LIMITS, wall_s=1.5))
    assert result.cause == "wall-clock limit of 1.5s exceeded" and 1.5 <= result.wall_s < 10


def test_memory_bomb_ends_as_a_failure(sandbox):
    result = python(sandbox, "b = []\nwhile True: b.append(bytearray(16 << 20))",
                    limits=dataclasses.replace(LIMITS, memory_bytes=128 << 20, wall_s=10))
    assert not result.ok and "wall-clock" not in (result.cause or ""), result.describe()


def test_process_limit_bounds_the_process_count(sandbox):
    wait_for_no_processes(uid_of(sandbox), 5)  # RLIMIT_NPROC counts every process of the uid
    code = ("import subprocess\nkids = []\ntry:\n    for _ in range(100):\n"
            "        kids.append(subprocess.Popen(['/bin/sleep', '5']))\nexcept OSError:\n    pass\n"
            "print(len(kids))\nfor kid in kids: kid.kill()")
    result = python(sandbox, code, limits=dataclasses.replace(LIMITS, nproc=16))
    assert result.ok, result.describe()
    assert 0 < int(result.stdout_tail) < 16


def test_fork_bomb_ends_and_the_host_survives(sandbox):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = python(sandbox, code, limits=dataclasses.replace(LIMITS, wall_s=3.0, nproc=32))
    assert not result.ok and result.cause is not None and result.wall_s < 20
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    assert wait_for_no_processes(uid_of(sandbox), 5) == [], "the bomb's processes outlived the sandbox"


def test_a_run_right_after_a_fork_bomb_works(sandbox):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    python(sandbox, code, limits=dataclasses.replace(LIMITS, wall_s=2.0, nproc=32))
    result = sandbox.run(["/bin/true"], limits=dataclasses.replace(LIMITS, nproc=8))
    assert result.ok, result.describe()


@pytest.mark.parametrize("writer", ["python", "head"])
def test_one_gigabyte_of_stdout_is_capped(sandbox, writer):
    argv = {"python": [sandbox.python, "-c",
                       "import sys\nfor _ in range(1024): sys.stdout.buffer.write(b'y' * (1 << 20))"],
            "head": ["/usr/bin/head", "-c", str(1 << 30), "/dev/zero"]}[writer]
    start = time.monotonic()
    result = sandbox.run(argv)
    assert time.monotonic() - start < 20 and not result.ok
    assert len(result.stdout_tail) == LIMITS.output_tail_bytes


def test_no_network_reaches_nothing(sandbox, host_listener):
    result = python(sandbox, CONNECT, str(host_listener), "127.0.0.1", "192.0.2.1")
    assert result.ok, result.describe()
    assert result.stdout_tail.split() == [b"127.0.0.1", b"ConnectionRefusedError", b"192.0.2.1", b"OSError"]
