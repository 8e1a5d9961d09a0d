"""Discovering programs: ids, modes, groups, things that are not programs; the host-side cache helpers."""

import os
import stat
from pathlib import Path

import pytest

from pipeline import go_build
from pipeline.sources.go import GoProgram, NotAProgram, discover_programs
from tests.go.conftest import EXAMPLES, requires_go

MAIN = "package main\n\nfunc main() {}\n"
TEST = 'package p\n\nimport "testing"\n\nfunc TestA(t *testing.T) {}\n'


def make(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_programs_groups_and_non_programs(tmp_path):
    make(tmp_path, {
        "b_main/main.go": MAIN,
        "a_test/p.go": "package p\n", "a_test/p_test.go": TEST,
        "group/inner/main.go": MAIN, "group/notes.txt": "x",
        "mod/go.mod": "module example.com/mod\n\ngo 1.26\n", "mod/main.go": MAIN,
        "with_sub/main.go": MAIN, "with_sub/sub/sub.go": "package sub\n",
        "docs/img/readme.txt": "not go",
        ".hidden/main.go": MAIN, "_skip/main.go": MAIN, "testdata/main.go": MAIN,
        "top_level_file.go": MAIN,
    })
    (tmp_path / "linked").symlink_to(tmp_path / "b_main")
    found = discover_programs(str(tmp_path))
    assert [f.program_id for f in found] == ["a_test", "b_main", "docs", "group/inner", "linked", "mod", "with_sub"]
    kinds = {f.program_id: f for f in found}
    assert isinstance(kinds["docs"], NotAProgram) and "no .go file" in kinds["docs"].reason
    assert isinstance(kinds["linked"], NotAProgram) and "symbolic link" in kinds["linked"].reason
    assert kinds["a_test"].mode == "test" and kinds["b_main"].mode == "main"
    assert kinds["b_main"].module_path == "prog" and kinds["b_main"].file_prefix == "prog/"
    assert kinds["mod"].module_path == "example.com/mod"
    assert all(isinstance(kinds[i], GoProgram) for i in ("group/inner", "with_sub"))


def test_not_a_directory_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        discover_programs(str(tmp_path / "missing"))


def test_bundled_examples_modes():
    found = {f.program_id: f for f in discover_programs(str(EXAMPLES))}
    assert len(found) == 43 and all(isinstance(f, GoProgram) for f in found.values())
    assert {i for i, f in found.items() if f.mode == "test"} == {
        "bank_mutex_test", "failing_test", "panic_in_test_goroutine", "stuck_test", "subtests_shards",
        "two_tests", "waitgroup_test"}


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
