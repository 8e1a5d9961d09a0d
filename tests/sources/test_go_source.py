"""Discovering programs: ids, modes, groups, things that are not programs."""

import pytest
from go_helpers import EXAMPLES

from pipeline.sources.go_programs import GoProgram, NotAProgram, discover_programs

MAIN = "package main\n\nfunc main() {}\n"
TEST = 'package p\n\nimport "testing"\n\nfunc TestA(t *testing.T) {}\n'


def make(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_programs_groups_and_non_programs(tmp_path):
    make(
        tmp_path,
        {
            "b_main/main.go": MAIN,
            "a_test/p.go": "package p\n",
            "a_test/p_test.go": TEST,
            "group/inner/main.go": MAIN,
            "group/notes.txt": "x",
            "mod/go.mod": "module example.com/mod\n\ngo 1.26\n",
            "mod/main.go": MAIN,
            "with_sub/main.go": MAIN,
            "with_sub/sub/sub.go": "package sub\n",
            "docs/img/readme.txt": "not go",
            ".hidden/main.go": MAIN,
            "_skip/main.go": MAIN,
            "testdata/main.go": MAIN,
            "top_level_file.go": MAIN,
        },
    )
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
    assert len(found) == 53 and all(isinstance(f, GoProgram) for f in found.values())
    assert {i for i, f in found.items() if f.mode == "test"} == {
        "bank_mutex_test",
        "failing_test",
        "leak_in_test",
        "leak_never_started",
        "panic_in_test_goroutine",
        "stuck_test",
        "subtests_shards",
        "two_tests",
        "waitgroup_test",
    }
