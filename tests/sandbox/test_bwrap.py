"""What only the bwrap backend has; the behaviours every backend shares are in test_backends.py."""

import os
import shutil

import pytest

from pipeline.sandbox.bwrap import sandbox_uid

if shutil.which("bwrap") is None and os.environ.get("CI") != "true":
    pytest.skip("bubblewrap is not installed", allow_module_level=True)


def test_commands_run_as_the_workers_unprivileged_uid(bwrap_sandbox):
    result = bwrap_sandbox.run(["/usr/bin/id", "-u"])
    assert result.ok, result.describe()
    assert int(result.stdout_tail) == (sandbox_uid() if os.geteuid() == 0 else 65534)


def test_a_machine_without_bubblewrap_is_told_how_to_get_it(monkeypatch):
    from pipeline.engine.errors import SetupError
    from pipeline.sandbox import check_sandbox

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SetupError, match=r"needs bubblewrap: install it \(apt-get install bubblewrap"):
        check_sandbox("bwrap")
