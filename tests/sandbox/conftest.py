"""Fixtures of the sandbox tests: each backend with small limits (`backend` runs a test once per isolating
backend), a Docker engine and the sandbox image, once per session.

Without an engine the Docker tests are skipped with the reason, except under CI=true, where an engine is
part of the contract (.ci/run starts one) and its absence fails them; likewise bubblewrap.
"""

import os
import shutil
import socket

import pytest

from pipeline.sandbox import SandboxLimits, make_sandbox

# Small limits keep the bombs quick; each test narrows what it needs further.
TEST_LIMITS = SandboxLimits(
    wall_s=20.0, memory_bytes=256 << 20, cpu_s=30, nproc=64, file_bytes=16 << 20, output_tail_bytes=4096
)


@pytest.fixture(scope="session")
def docker_client():
    from pipeline.sandbox.image import connect

    try:
        return connect(timeout=10)
    except RuntimeError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no Docker engine: {error}")
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def docker_sandbox(docker_client):
    """The docker backend on the image of this tree (the first session builds the base: minutes, once)."""
    from pipeline.sandbox.docker import DockerSandbox

    return DockerSandbox(TEST_LIMITS)


@pytest.fixture(scope="session")
def bwrap_sandbox():
    """The bwrap backend; without bubblewrap its tests are skipped (failed under CI=true)."""
    if shutil.which("bwrap") is None and os.environ.get("CI") != "true":
        pytest.skip("bubblewrap is not installed")
    return make_sandbox("bwrap", TEST_LIMITS)


@pytest.fixture(scope="session", params=["bwrap", "docker"])
def backend(request):
    """Each isolating backend in turn, with TEST_LIMITS: for the behaviours every one of them must have."""
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture
def host_listener():
    """The port of a TCP server on the host's loopback, which no sandbox may reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()
