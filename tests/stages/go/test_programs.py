"""The program travels with its runs (go_programs: sources, hash, mode, module, timeout), and per-program
timeouts from a header comment or the programs manifest, validated with errors that name the fix."""

import textwrap

import pytest
from go_helpers import requires_bwrap, requires_go, trace, write_program

from pipeline.sources.go_programs import NotAProgram, discover_programs, program_files, program_hash

SLEEPY = """{header}package main

import "time"

// main sleeps longer than the job's default timeout in these tests, then ends.
func main() {{
	time.Sleep(1500 * time.Millisecond)
}}
"""

HELPER = """package main

func helper() int { return 41 }
"""

SHORT_DEFAULT = 0.6  # seconds: what the sleepy program exceeds without its own timeout


@requires_go
@requires_bwrap
def test_every_run_names_its_program_whose_sources_are_stored(tmp_path, go_tools):
    main = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println(helper() + 1) }\n'
    program = write_program(tmp_path / "two_files", {"main.go": main, "helper.go": HELPER})
    (tmp_path / "two_files" / "go.mod").write_text("module example.com/two\n\ngo 1.26\n")
    program = next(p for p in discover_programs(str(tmp_path)) if p.program_id == "two_files")
    traced, _ = trace(program, go_tools, runs=2)
    [row] = traced.rows("go_programs")
    assert [f["path"] for f in row["files"]] == ["go.mod", "helper.go", "main.go"]
    assert {f["path"]: f["text"] for f in row["files"]}["helper.go"] == HELPER
    assert (row["mode"], row["module_path"], row["timeout_source"]) == ("main", "example.com/two", "default")
    assert row["program_hash"] == program_hash(program_files(program.path))
    runs = traced.rows("go_runs")
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert {r["program_hash"] for r in runs} == {row["program_hash"]}


@requires_go
@requires_bwrap
def test_a_program_that_does_not_compile_is_stored_too(tmp_path, go_tools):
    program = write_program(tmp_path / "broken", {"main.go": "package main\n\nfunc main() { undefined() }\n"})
    traced, _ = trace(program, go_tools, runs=2)
    [row] = traced.rows("go_programs")
    [run] = traced.rows("go_runs")
    assert run["status"] == "build_error" and run["program_hash"] == row["program_hash"]


def test_editing_a_source_changes_the_hash(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "main.go").write_text("package main\n\nfunc main() {}\n")
    before = program_hash(program_files(str(tmp_path / "p")))
    (tmp_path / "p" / "main.go").write_text("package main\n\nfunc main() { }\n")
    assert program_hash(program_files(str(tmp_path / "p"))) != before


@requires_go
@requires_bwrap
@pytest.mark.parametrize(
    ("header", "manifest", "status", "timeout_s", "source"),
    [
        ("", "", "timeout", SHORT_DEFAULT, "default"),
        ("// tracegen: timeout=5s\n\n", "", "ok", 5.0, "header"),
        ("", '[program."sleepy"]\ntimeout = "5s"\n', "ok", 5.0, "manifest"),
        ("// tracegen: timeout=300ms\n\n", '[program."sleepy"]\ntimeout = 5\n', "ok", 5.0, "manifest"),
    ],
)
def test_a_program_runs_with_its_own_timeout(tmp_path, go_tools, header, manifest, status, timeout_s, source):
    write_program(tmp_path / "sleepy", {"main.go": SLEEPY.format(header=header)})
    if manifest:
        (tmp_path / "tracegen.toml").write_text(manifest)
    [program] = discover_programs(str(tmp_path))
    traced, _ = trace(program, go_tools, runs=1, timeout_s=SHORT_DEFAULT)
    [row] = traced.rows("go_programs")
    assert (row["timeout_s"], row["timeout_source"]) == (timeout_s, source)
    [run] = traced.rows("go_runs")
    assert run["status"] == status, run["stderr_tail"]


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("// tracegen: timeout=30\n", "timeout='30' is not a duration"),
        ("// tracegen: timeout=2h\n", "between 0.01s and 3600s"),
        ("// tracegen: timeot=3s\n", "'timeot=3s' is not timeout=DURATION"),
    ],
)
def test_a_bad_header_is_the_programs_failure_naming_the_line_and_the_fix(tmp_path, header, says):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "main.go").write_text(f"// Command p.\n{header}package main\n\nfunc main() {{}}\n")
    [entry] = discover_programs(str(tmp_path))
    assert isinstance(entry, NotAProgram) and entry.error_type == "BadProgramHeader"
    assert "main.go:2" in entry.reason and says in entry.reason and "// tracegen: timeout=30s" in entry.reason


def test_headers_of_two_files_must_agree(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.go").write_text("// tracegen: timeout=1s\npackage main\n\nfunc main() {}\n")
    (tmp_path / "p" / "b.go").write_text("// tracegen: timeout=2s\npackage main\n")
    [entry] = discover_programs(str(tmp_path))
    assert isinstance(entry, NotAProgram) and "a.go:1 says 1s, b.go:1 says 2s" in entry.reason


def test_a_comment_below_the_package_clause_is_not_a_header(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "main.go").write_text("package main\n\n// tracegen: timeout=nonsense\nfunc main() {}\n")
    [entry] = discover_programs(str(tmp_path))
    assert entry.timeout_s is None and entry.timeout_source == "default"


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        ('[program."nosuch"]\ntimeout = "1s"\n', "names no program under"),
        ('[program."p"]\ntimeout = "soon"\n', "timeout = 'soon' is not a duration"),
        ('[program."p"]\ntimeout = "1s"\nruns = 3\n', 'it takes exactly one key, timeout = "30s"'),
        ('[programs."p"]\ntimeout = "1s"\n', "unknown top-level key(s) programs"),
        ('[program."p"\n', "not valid TOML"),
    ],
)
def test_a_bad_manifest_stops_the_job_naming_the_program_and_the_fix(tmp_path, manifest, says):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "main.go").write_text("package main\n\nfunc main() {}\n")
    (tmp_path / "tracegen.toml").write_text(textwrap.dedent(manifest))
    with pytest.raises(ValueError, match="tracegen.toml") as error:
        discover_programs(str(tmp_path))
    assert says in str(error.value)
