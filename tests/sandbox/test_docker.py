"""What only the docker backend has: the container's real configuration as the engine sees it (no network, ever),
the image; the behaviours every backend shares are in test_backends.py."""

import dataclasses
import os
import threading
import time
import uuid

import pytest

from pipeline.sandbox import Bind
from pipeline.sandbox.docker import LABEL


def limits(sandbox, **changes):
    return dataclasses.replace(sandbox.limits, **changes)


def python(sandbox, code: str, **kwargs):
    return sandbox.run([sandbox.python, "-c", code], **kwargs)


def inspect_while_running(sandbox, client) -> tuple[dict, object]:
    """Run `sleep` in the sandbox, inspect its container through the API, kill it; (inspect, result)."""
    token = uuid.uuid4().hex
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(result=sandbox.run(["/bin/sh", "-c", "sleep 30", token])))
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
    assert not [
        c for c in client.containers.list(all=True, filters={"label": LABEL}) if token in c.attrs["Config"]["Cmd"]
    ], "the container was not removed"
    return attrs, outcome["result"]


def test_container_configuration_seen_by_the_engine(docker_sandbox, docker_client):
    attrs, result = inspect_while_running(docker_sandbox, docker_client)
    host, config = attrs["HostConfig"], attrs["Config"]
    assert host["NetworkMode"] == "none"
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
    assert result.returncode == 137 and result.cause == "killed by signal SIGKILL"


def test_output_files_cannot_be_swapped_for_a_host_file(docker_sandbox, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    swap = (
        f'p=$(readlink /proc/self/fd/1); rm -f "$p"; ln -sf {secret} "$p"; mv "$p" "$p.x"; '
        f'ln -s {secret} "$(dirname "$p")/stderr"; echo written'
    )
    result = docker_sandbox.run(["/bin/sh", "-c", swap])
    assert b"host secret" not in result.stdout_tail + result.stderr_tail
    assert result.stdout_tail == b"written\n"


def test_the_images_tracers_are_read_only(docker_sandbox):
    result = python(docker_sandbox, "open('/opt/tracegen/tracers/x', 'w')")
    assert result.returncode == 1 and b"Read-only file system" in result.stderr_tail, result.describe()


def test_tmp_is_sized_by_the_tmpfs_limit(docker_sandbox):
    code = "import os\ns = os.statvfs('/tmp'); print(s.f_blocks * s.f_frsize)"
    result = python(docker_sandbox, code)
    assert result.ok, result.describe()
    assert 0 < int(result.stdout_tail) <= min(docker_sandbox.tmp_bytes, docker_sandbox.limits.memory_bytes)


def test_no_network_has_no_interface_but_loopback(docker_sandbox):
    result = docker_sandbox.run(["/bin/ls", "/sys/class/net"])
    assert result.stdout_tail.split() == [b"lo"]


@pytest.mark.skipif(not os.path.isdir("/usr/local/go"), reason="no Go toolchain at /usr/local/go on this host")
@pytest.mark.parametrize("bound_by_caller", [False, True])
def test_host_go_toolchain_is_visible(docker_sandbox, bound_by_caller):
    binds = [Bind("/usr/local/go")] if bound_by_caller else []
    result = docker_sandbox.run(["go", "version"], binds=binds)
    assert result.ok and result.stdout_tail.startswith(b"go version"), result.describe()


def test_function_tracer_runs_in_the_container(docker_sandbox):
    from pipeline.sources.function_records import parse_line
    from pipeline.stages.trace_functions import TraceSettings, trace_functions

    record = parse_line(
        '{"id": "add", "code": "def f(a, b):\\n    c = a + b\\n    return c", "input": "1, 2"}', "test:1"
    )
    output = trace_functions([record], docker_sandbox, TraceSettings(), "unit")
    assert output.rows("failures") == [] and [row["exit"] for row in output.rows("traces")] == ["normal"]


def test_install_step_makes_a_venv_in_a_writable_bind(docker_sandbox, tmp_path):
    venv = tmp_path / "venv"
    result = docker_sandbox.run(
        [docker_sandbox.python, "-m", "venv", str(venv)],
        binds=[Bind(str(tmp_path), True)],
        limits=limits(docker_sandbox, wall_s=60),
    )
    assert result.ok, result.describe()
    check = docker_sandbox.run(
        [str(venv / "bin" / "python"), "-c", "import pip, sys; print(sys.prefix)"], binds=[Bind(str(tmp_path))]
    )
    assert check.ok and check.stdout_tail.strip() == str(venv).encode(), check.describe()


def test_bad_bind_is_a_value_error(docker_sandbox):
    with pytest.raises(ValueError, match="existing absolute path"):
        docker_sandbox.run(["/bin/true"], binds=[Bind("/no/such/dir")])
