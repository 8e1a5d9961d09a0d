"""The host's reader of sandbox outputs: one directory opened by descriptor, every entry read without
following anything, whatever was planted at its path or among its entries."""

import os

import pytest

from pipeline.sandbox.files import SandboxDirectory


def test_only_regular_files_inside_the_directory_the_host_made_are_read(tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"secret")
    out = SandboxDirectory(str(tmp_path / "out"))
    with out:
        (tmp_path / "out" / "plain").write_bytes(b"data")
        os.symlink(secret, tmp_path / "out" / "link")
        os.mkdir(tmp_path / "out" / "dir")
        os.mkfifo(tmp_path / "out" / "fifo")  # a reader opening it blocking would hang
        os.rename(tmp_path / "out", tmp_path / "moved")
        os.symlink(tmp_path, tmp_path / "out")  # the path now leads to a host directory
        assert out.read("plain", 100) == b"data" and out.read("plain", 2) == b"da"
        assert [out.read(name, 100) for name in ("link", "dir", "fifo", "missing", "host-secret")] == [None] * 5
        for name in ("../host-secret", "dir/x", "", ".", ".."):
            with pytest.raises(ValueError):
                out.read(name, 100)
