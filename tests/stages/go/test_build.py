"""The host side of the harness build: its version follows its sources, the shared build cache is linked per
program, and the harness is built once per cache."""

import os
import stat
from pathlib import Path

from go_helpers import requires_go

from pipeline.stages.go import build as go_build


def make(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_harness_version_follows_the_sources(tmp_path):
    (tmp_path / "main.go").write_text("package main\n")
    (tmp_path / "go.mod").write_text("module x\n")
    first = go_build.harness_version(tmp_path)
    (tmp_path / "main_test.go").write_text("package main\n")  # tests do not change the binary
    assert go_build.harness_version(tmp_path) == first
    (tmp_path / "main.go").write_text("package main\n// changed\n")
    assert go_build.harness_version(tmp_path) != first


def test_linked_cache_shares_files_but_not_directories(tmp_path):
    base = tmp_path / "base"
    make(base, {"00/abc-d": "output", "README": "cache", "trim.txt": "1"})
    copy = tmp_path / "copy"
    go_build.link_cache(str(base), str(copy), share=True)
    assert os.path.samefile(base / "00" / "abc-d", copy / "00" / "abc-d")
    assert not (copy / "trim.txt").exists()
    assert stat.S_IMODE(os.stat(copy / "00").st_mode) == 0o777
    (copy / "00" / "new-a").write_text("added by a build")
    assert not (base / "00" / "new-a").exists()
    copied = tmp_path / "copied"
    go_build.link_cache(str(base), str(copied), share=False)
    assert (copied / "00" / "abc-d").read_text() == "output"
    assert not os.path.samefile(base / "00" / "abc-d", copied / "00" / "abc-d")


@requires_go
def test_the_harness_is_built_once_per_cache(tmp_path):
    binary, version = go_build.ensure_harness(str(tmp_path))
    assert Path(binary).is_file() and os.access(binary, os.X_OK) and version in binary
    mtime = Path(binary).stat().st_mtime_ns
    assert go_build.ensure_harness(str(tmp_path)) == (binary, version)
    assert Path(binary).stat().st_mtime_ns == mtime
    assert go_build.sweep_work(str(tmp_path)) == 0
