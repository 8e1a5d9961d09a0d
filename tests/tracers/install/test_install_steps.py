"""The install step's own machinery (tracers/install/step.py, commands.py), without pip: the deadline that
bounds every command, bounded output, which source a failed pip run points at, and the words that mean the
editable build failed."""

import os
import time

from tracers.install.commands import OUTPUT_KEEP, Runner, error_summary
from tracers.install.sources import Source
from tracers.install.step import (
    EDITABLE_FAILED,
    FALLBACK_VERSION,
    VERSION_ENV,
    next_to_drop,
    scm_version_env,
    versions_from_vcs,
)


def runner(budget_s: float) -> tuple[Runner, list]:
    steps: list = []
    return Runner({"PATH": os.environ["PATH"]}, steps, time.monotonic() + budget_s), steps


def test_the_deadline_kills_the_command_and_its_children(tmp_path):
    run, steps = runner(6)
    marker = tmp_path / "child-finished"
    started = time.monotonic()
    ok, output = run.run(f"(sleep 7; touch {marker}) & sleep 30", str(tmp_path))
    assert not ok and run.timed_out and time.monotonic() - started < 7
    assert "TimeoutExpired" in output and steps[-1]["returncode"] != 0
    assert run.run(["true"], str(tmp_path)) == (False, "not started: the install's time budget is spent")
    time.sleep(max(0.0, started + 8 - time.monotonic()))
    assert not marker.exists()  # the backgrounded child went with its process group


def test_a_command_s_own_timeout_is_not_the_budget(tmp_path):
    run, _ = runner(60)
    ok, output = run.run(["sleep", "30"], str(tmp_path), timeout=5)
    assert not ok and not run.timed_out and "TimeoutExpired" in output
    assert run.run(["true"], str(tmp_path))[0]


def test_output_is_bounded_at_both_ends(tmp_path):
    run, steps = runner(60)
    ok, output = run.run("echo first; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo last", str(tmp_path))
    assert ok and output.startswith("first") and output.rstrip().endswith("last")
    assert len(output) < 2 * OUTPUT_KEEP + 100 and "bytes)..." in output
    assert len(steps[-1]["output"]) <= 4003


def test_a_failed_run_is_summarised_by_its_error_lines():
    output = """
      Getting requirements to build editable: finished with status 'error'
      error: subprocess-exited-with-error
        RuntimeError: vendor/not-there is missing
      note: This error originates from a subprocess, and is likely not a problem with pip.
    ERROR: Could not find a version that satisfies the requirement six==0.0.1 (from versions: 1.0)
    ERROR: No matching distribution found for six==0.0.1
    """
    assert error_summary(output) == (
        "RuntimeError: vendor/not-there is missing | ERROR: Could not find a version that satisfies the "
        "requirement six==0.0.1 (from versions: 1.0) | ERROR: No matching distribution found for six==0.0.1"
    )
    assert error_summary("one\ntwo\nthree\nfour\n") == "two | three | four"
    assert error_summary("") == "(no output)"


def test_only_a_failed_editable_build_reads_as_one():
    succeeded = [
        "  Checking if build backend supports build_editable: finished with status 'done'",
        "  Preparing editable metadata (pyproject.toml): finished with status 'done'",
        "  Building editable for pkg (pyproject.toml): finished with status 'done'",
        "Obtaining file:///src",
    ]
    failed = [
        "ERROR: Project file:///src has a 'pyproject.toml' and its build backend is missing the 'build_editable' hook.",
        "  Getting requirements to build editable: finished with status 'error'",
        "  × Preparing editable metadata (pyproject.toml) did not run successfully.",
    ]
    assert not EDITABLE_FAILED.search("\n".join(succeeded))
    assert all(EDITABLE_FAILED.search(line) for line in failed)


def source(kind: str, name: str, lines: list[str]) -> Source:
    return Source(kind, name, lines)


def test_the_source_to_drop_is_the_one_pip_names_else_the_most_suspect():
    kept = [
        source("dependency-groups", "test", ["six==0.0.1"]),
        source("extra", "test", ["attrs"]),
        source("requirements", "a.txt", ["toolz"]),
        source("requirements", "b.txt", ["tomli"]),
        source("tox", "testenv", ["Six>=1"]),
    ]
    named = "ERROR: No matching distribution found for six==0.0.1\nThe user requested pkg 0.1 (from /src)"
    assert next_to_drop(kept, named, "pkg").label == "tox:testenv"  # holds six, and tox before groups
    assert next_to_drop(kept[:4], named, "pkg").label == "dependency-groups:test"
    assert next_to_drop(kept, "ERROR: ResolutionImpossible", "pkg").label == "requirements:b.txt"
    assert next_to_drop(kept[:2], "", "pkg").label == "dependency-groups:test"  # the extra goes last


def test_setuptools_scm_pretends_for_the_package_alone_unless_hatch_vcs_asks():
    others = {name: "2.1" for name in VERSION_ENV}  # pdm, pbr, poetry and uv dynamic versioning
    assert (
        scm_version_env("My.Pkg", "setuptools>=61 setuptools-scm", "2.1")
        == {"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_MY_PKG": "2.1"} | others
    )
    assert (
        scm_version_env("pkg", "hatchling hatch_vcs>=0.3", "2.1") == {"SETUPTOOLS_SCM_PRETEND_VERSION": "2.1"} | others
    )
    assert scm_version_env("", "")["SETUPTOOLS_SCM_PRETEND_VERSION"] == FALLBACK_VERSION


def test_only_a_build_versioned_from_vcs_tags_asks_the_index_for_a_release():
    assert versions_from_vcs("setuptools>=64 setuptools_scm[toml]>=8")
    assert versions_from_vcs("hatchling Hatch-VCS")
    assert versions_from_vcs("poetry-core poetry-dynamic-versioning>=1,<2")
    assert not versions_from_vcs("setuptools>=61 wheel")
    assert not versions_from_vcs("flit_core>=3.2 setuptools-scm-git-archive")  # a plugin, not the versioner
