"""The `process` backend: resource limits only, opt-in by name, with a warning; and backend selection."""

import os
import sys
import warnings

import pytest

from pipeline.sandbox import SandboxLimits, make_sandbox

LIMITS = SandboxLimits(wall_s=5.0, memory_bytes=1 << 30, file_bytes=1 << 20)


@pytest.fixture()
def sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_sandbox("process", LIMITS)


def test_choosing_it_warns_that_nothing_is_isolated():
    with pytest.warns(UserWarning, match="without isolation"):
        make_sandbox("process")


def test_an_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="choose one of bwrap, docker, process"):
        make_sandbox("chroot")


def test_limits_still_apply(sandbox, tmp_path):
    memory = sandbox.run([sys.executable, "-c", "b = bytearray(4 << 30)"])
    assert memory.returncode == 1 and b"MemoryError" in memory.stderr_tail
    flood = sandbox.run([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"])
    assert flood.returncode == 1 and b"File too large" in flood.stderr_tail
    loop = sandbox.run([sys.executable, "-c", "while True: pass"], limits=SandboxLimits(wall_s=1.0))
    assert loop.cause == "wall-clock limit of 1s exceeded"


def test_the_environment_is_only_what_is_given(sandbox, tmp_path):
    result = sandbox.run(
        [sys.executable, "-c", "import os; print(sorted(os.environ))"], env={"ONLY": "1"}, cwd=str(tmp_path)
    )
    assert result.ok and b"'ONLY'" in result.stdout_tail and b"HOME" not in result.stdout_tail
    assert os.environ.get("ONLY") is None
