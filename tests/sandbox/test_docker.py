"""The docker backend: the container's real configuration, and what untrusted code can and cannot do in it."""

import dataclasses
import os
import subprocess
import threading
import time
import uuid

import pytest

from pipeline.sandbox import Bind
from pipeline.sandbox.docker import LABEL
from sandbox_helpers import CONNECT, proc_status, processes_of


def limits(sandbox, **changes):
    return dataclasses.replace(sandbox.limits, **changes)


def python(sandbox, code: str, **kwargs):
    return sandbox.run([sandbox.python, "-c", code], **kwargs)


def inspect_while_running(sandbox, client, *, network: bool) -> tuple[dict, object]:
    """Run `sleep` in the sandbox, inspect its container through the API, kill it; (inspect, result)."""
    token = uuid.uuid4().hex
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(
        result=sandbox.run(["/bin/sh", "-c", "sleep 30", token], network=network)))
    thread.start()
    attrs = None
    deadline = time.monotonic() + 15
    while attrs is None and time.monotonic() < deadline:
        for container in client.containers.list(filters={"label": LABEL}):
            if token in container.attrs["Config"]["Cmd"]:
                attrs = client.api.inspect_container(container.id)
                container.kill()
        time.sleep(0.05)
    thread.join(30)
    assert attrs is not None, "the sandbox's container never showed up running"
    assert not [c for c in client.containers.list(all=True, filters={"label": LABEL})
                if token in c.attrs["Config"]["Cmd"]], "the container was not removed"
    return attrs, outcome["result"]


@pytest.mark.parametrize("network", [False, True], ids=["trace", "install"])
def test_container_configuration_seen_by_the_engine(docker_sandbox, docker_client, network):
    attrs, result = inspect_while_running(docker_sandbox, docker_client, network=network)
    host, config = attrs["HostConfig"], attrs["Config"]
    assert host["NetworkMode"] == (docker_sandbox.install_network if network else "none")
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert host["Privileged"] is False
    assert "no-new-privileges" in host["SecurityOpt"]
    assert not any("seccomp" in option for option in host["SecurityOpt"])  # the engine's default profile
    assert host["PidsLimit"] == docker_sandbox.limits.nproc
    assert host["Memory"] == host["MemorySwap"] == docker_sandbox.limits.memory_bytes
    assert host["NanoCpus"] == 1_000_000_000
    assert "/tmp" in host["Tmpfs"]
    assert host["LogConfig"]["Type"] == "none"
    assert {u["Name"]: u["Hard"] for u in host["Ulimits"]}["fsize"] == docker_sandbox.limits.file_bytes
    user = config["User"].split(":")[0]
    assert user not in ("", "0", "root")
    assert all(m["RW"] is False for m in attrs["Mounts"] if m["Destination"] == "/usr/local/go")
    ca = [m for m in attrs["Mounts"] if m["Destination"] == docker_sandbox.ca_bundle]
    assert len(ca) == (network and os.path.isfile(docker_sandbox.ca_bundle)) and all(not m["RW"] for m in ca)
    assert result.returncode == 137 and result.cause == "killed by signal SIGKILL"


def test_process_is_unprivileged_inside(docker_sandbox):
    result = docker_sandbox.run(["/bin/cat", "/proc/self/status"])
    status = proc_status(result.stdout_tail)
    assert result.ok, result.describe()
    assert all(uid != "0" for uid in status["Uid"].split())
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # a filter is on


def test_environment_is_exactly_what_is_given(docker_sandbox):
    result = docker_sandbox.run(["/usr/bin/env"], env={"GIVEN": "a b=c"})
    assert result.ok, result.describe()
    seen = dict(line.split("=", 1) for line in result.stdout_tail.decode().splitlines())
    assert seen == {"PATH": "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "GIVEN": "a b=c"}


def test_exit_status_and_stderr_tail_come_back(docker_sandbox):
    result = python(docker_sandbox, "import sys; print('out'); sys.stderr.write('x' * 10000 + 'boom'); sys.exit(3)")
    assert (result.returncode, result.cause, result.ok) == (3, None, False)
    assert result.stdout_tail == b"out\n"
    assert len(result.stderr_tail) == docker_sandbox.limits.output_tail_bytes
    assert result.stderr_tail.endswith(b"boom")


def test_output_files_cannot_be_swapped_for_a_host_file(docker_sandbox, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    swap = (f'p=$(readlink /proc/self/fd/1); rm -f "$p"; ln -sf {secret} "$p"; mv "$p" "$p.x"; '
            f'ln -s {secret} "$(dirname "$p")/stderr"; echo written')
    result = docker_sandbox.run(["/bin/sh", "-c", swap])
    assert b"host secret" not in result.stdout_tail + result.stderr_tail
    assert result.stdout_tail == b"written\n"


def test_missing_command_is_a_result_not_an_exception(docker_sandbox):
    result = docker_sandbox.run(["/no/such/program"])
    assert result.returncode == 127 and b"No such file" in result.stderr_tail


def test_writable_bind_receives_a_file_and_readonly_bind_refuses(docker_sandbox, tmp_path):
    out, inp = tmp_path / "out", tmp_path / "in"
    out.mkdir()
    inp.mkdir()
    (inp / "data").write_text("given")
    code = (f"import os\ndata = open({str(inp / 'data')!r}).read()\n"
            f"open({str(out / 'result')!r}, 'w').write(data + ' and written')\n"
            f"try:\n    open({str(inp / 'new')!r}, 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n")
    result = python(docker_sandbox, code, binds=[Bind(str(inp)), Bind(str(out), writable=True)], cwd=str(out))
    assert result.ok, result.describe()
    assert (out / "result").read_text() == "given and written"
    assert not (inp / "new").exists() and result.stdout_tail.strip() == b"OSError"


@pytest.mark.parametrize("path", ["/etc/passwd-new", "/root/x", "/usr/lib/x", "/opt/tracegen/tracers/x"])
def test_writes_outside_binds_and_tmp_fail(docker_sandbox, path):
    result = python(docker_sandbox, f"open({path!r}, 'w')")
    assert result.returncode == 1 and (b"Read-only file system" in result.stderr_tail
                                       or b"Permission denied" in result.stderr_tail), result.describe()


def test_tmp_is_private_writable_and_sized(docker_sandbox):
    name = f"/tmp/tracegen-test-{uuid.uuid4().hex}"
    code = f"import os\nopen({name!r}, 'w').write('ok')\ns = os.statvfs('/tmp'); print(s.f_blocks * s.f_frsize)"
    result = python(docker_sandbox, code)
    assert result.ok, result.describe()
    assert 0 < int(result.stdout_tail) <= min(docker_sandbox.tmp_bytes, docker_sandbox.limits.memory_bytes)
    assert not os.path.exists(name)


def test_infinite_loop_is_killed_at_the_wall_clock(docker_sandbox):
    result = python(docker_sandbox, "while True: pass", limits=limits(docker_sandbox, wall_s=1.5))
    assert result.cause == "wall-clock limit of 1.5s exceeded"
    assert 1.5 <= result.wall_s < 10 and not result.ok


def test_memory_bomb_ends_as_a_failure_with_a_cause(docker_sandbox):
    code = "b = []\nwhile True: b.append(bytearray(16 << 20))"
    result = python(docker_sandbox, code, limits=limits(docker_sandbox, memory_bytes=128 << 20))
    assert not result.ok and result.cause and result.cause.startswith("out of memory"), result.describe()


def test_pids_limit_bounds_the_process_count(docker_sandbox):
    code = ("import subprocess\nkids = []\ntry:\n    for _ in range(100):\n"
            "        kids.append(subprocess.Popen(['/bin/sleep', '5']))\nexcept OSError:\n    pass\n"
            "print(len(kids))\nfor kid in kids: kid.kill()")
    result = python(docker_sandbox, code, limits=limits(docker_sandbox, nproc=16))
    assert result.ok, result.describe()
    assert 0 < int(result.stdout_tail) < 16


def test_fork_bomb_ends_and_the_host_survives(docker_sandbox):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = python(docker_sandbox, code, limits=limits(docker_sandbox, wall_s=3.0, nproc=32))
    assert not result.ok and result.cause is not None
    assert result.wall_s < 20
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    assert processes_of(docker_sandbox.uid) == [], "processes of the sandbox uid outlived the container"


@pytest.mark.parametrize("writer", ["python", "head"])
def test_one_gigabyte_of_stdout_is_capped(docker_sandbox, writer):
    argv = {"python": [docker_sandbox.python, "-c",
                       "import sys\nfor _ in range(1024): sys.stdout.buffer.write(b'y' * (1 << 20))"],
            "head": ["/usr/bin/head", "-c", str(1 << 30), "/dev/zero"]}[writer]
    start = time.monotonic()
    result = docker_sandbox.run(argv)
    assert time.monotonic() - start < 20
    assert result.cause == f"output limit of {docker_sandbox.limits.file_bytes} bytes exceeded"
    assert len(result.stdout_tail) == docker_sandbox.limits.output_tail_bytes


@pytest.mark.parametrize("network", [False, True], ids=["trace", "install"])
def test_host_loopback_is_unreachable(docker_sandbox, host_listener, network):
    result = docker_sandbox.run([docker_sandbox.python, "-c", CONNECT, str(host_listener), "127.0.0.1"],
                                network=network)
    assert result.ok, result.describe()
    assert result.stdout_tail.split() == [b"127.0.0.1", b"ConnectionRefusedError"]


def test_no_network_reaches_no_other_address(docker_sandbox):
    result = docker_sandbox.run([docker_sandbox.python, "-c", CONNECT, "80", "172.17.0.1", "192.0.2.1"])
    assert result.stdout_tail.split() == [b"172.17.0.1", b"OSError", b"192.0.2.1", b"OSError"], result.describe()


def test_no_network_has_no_interface_but_loopback(docker_sandbox):
    result = docker_sandbox.run(["/bin/ls", "/sys/class/net"])
    assert result.stdout_tail.split() == [b"lo"]
    bridge = docker_sandbox.run(["/bin/ls", "/sys/class/net"], network=True)
    assert b"eth0" in bridge.stdout_tail.split()


@pytest.mark.skipif(not os.path.isdir("/usr/local/go"), reason="no Go toolchain at /usr/local/go on this host")
@pytest.mark.parametrize("bound_by_caller", [False, True])
def test_host_go_toolchain_is_visible(docker_sandbox, bound_by_caller):
    binds = [Bind("/usr/local/go")] if bound_by_caller else []
    result = docker_sandbox.run(["go", "version"], binds=binds)
    assert result.ok and result.stdout_tail.startswith(b"go version"), result.describe()


def test_programs_built_in_tmp_can_run(docker_sandbox):
    """`go run`, `go test` and pip builds execute what they just wrote to /tmp."""
    result = docker_sandbox.run(["/bin/sh", "-c", "cp /bin/echo /tmp/built && /tmp/built ran"])
    assert result.ok and result.stdout_tail == b"ran\n", result.describe()


def test_function_tracer_runs_in_the_container(docker_sandbox):
    from pipeline.sources.functions import parse_line
    from pipeline.stages.trace_functions import TraceSettings, trace_functions

    record, _ = parse_line('{"id": "add", "code": "def f(a, b):\\n    c = a + b\\n    return c", "input": "1, 2"}',
                           "test:1")
    rows, failures = trace_functions([record], docker_sandbox, TraceSettings(), "unit")[:2]
    assert failures == [] and [row["exit"] for row in rows] == ["normal"]


def test_install_step_makes_a_venv_in_a_writable_bind(docker_sandbox, tmp_path):
    venv = tmp_path / "venv"
    result = docker_sandbox.run([docker_sandbox.python, "-m", "venv", str(venv)], binds=[Bind(str(tmp_path), True)],
                                network=True, limits=limits(docker_sandbox, wall_s=60))
    assert result.ok, result.describe()
    check = docker_sandbox.run([str(venv / "bin" / "python"), "-c", "import pip, sys; print(sys.prefix)"],
                               binds=[Bind(str(tmp_path))])
    assert check.ok and check.stdout_tail.strip() == str(venv).encode(), check.describe()


def test_bad_bind_is_a_value_error(docker_sandbox):
    with pytest.raises(ValueError, match="existing absolute path"):
        docker_sandbox.run(["/bin/true"], binds=[Bind("/no/such/dir")])
