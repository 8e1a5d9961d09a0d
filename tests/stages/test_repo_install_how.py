"""The host's reading of install.json's `how` (untrusted: written in the sandbox) and the failure rows it gives.

`read_how` turns the sandbox's report into an InstallHow or refuses it naming the field; `report_how` gives one
failure (a row once recorded) per fallback or repair round. Pure: no sandbox, no pip.
"""

import copy

import pytest

from pipeline.engine.failures import Failures
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.install import Attempt, InstallHow, Prepared, Repair, read_how, report_how
from pipeline.stages.repos.trace import repo_input
from tracers.install.step import manifest_how

HOW = {
    "sources": ["dependency-groups:test", "requirements:requirements-dev.txt"],
    "step": "relaxed",
    "editable": False,
    "attempts": [
        {"step": "all", "editable": True, "ok": False, "error": "ERROR: No matching distribution found for six==0.0.1"},
        {"step": "without:requirements:requirements-dev.txt", "editable": True, "ok": False, "error": "x"},
        {"step": "relaxed", "editable": True, "ok": False, "error": "'build_editable' hook"},
        {"step": "relaxed", "editable": False, "ok": True, "error": None},
    ],
    "prepared": [
        {"command": "pybabel compile --directory src/lib/locale", "ok": True},
        {"command": "{envpython} scripts/generate.py", "ok": False},
    ],
    "repairs": [
        {"round": 1, "modules": ["yaml", "--cov"], "installed": ["PyYAML", "pytest-cov"], "unresolved": [], "ok": True},
        {"round": 2, "modules": ["nosuch"], "installed": [], "unresolved": ["nosuch"], "ok": False},
    ],
    "collected": 12,
    "notes": ["dependency-groups:dev: include-group cycle dev -> test -> dev"],
}


def test_a_report_reads_as_typed_values():
    how = read_how(copy.deepcopy(HOW))
    assert how.sources == ("dependency-groups:test", "requirements:requirements-dev.txt")
    assert how.attempts[-1] == Attempt("relaxed", False, True, None)
    assert how.repairs[0] == Repair(1, ("yaml", "--cov"), ("PyYAML", "pytest-cov"), (), True)
    assert how.prepared[1] == Prepared("{envpython} scripts/generate.py", False)
    assert (how.step, how.editable, how.collected) == ("relaxed", False, 12)
    assert read_how(manifest_how()) == InstallHow((), "manifest", None, (), (), (), None, ())


def forged(path: tuple, value):
    how = copy.deepcopy(HOW)
    target = how
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return how


@pytest.mark.parametrize(
    "path, value, named",
    [
        (("step",), "rm -rf /", "how.step"),
        (("step",), None, "how.step"),
        (("sources",), "dependency-groups:test", "how.sources"),
        (("sources",), ["x"] * 65, "how.sources"),
        (("sources", 0), "x" * 301, "how.sources[0]"),
        (("editable",), "yes", "how.editable"),
        (("collected",), -1, "how.collected"),
        (("collected",), True, "how.collected"),
        (("collected",), 1.5, "how.collected"),
        (("notes",), KeyError, "how"),
        (("surplus",), 1, "how"),
        (("attempts",), [{}] * 33, "how.attempts"),
        (("attempts", 0, "error"), "e" * 1001, "how.attempts[0].error"),
        (("attempts", 0, "ok"), 1, "how.attempts[0].ok"),
        (("attempts", 1, "step"), "without:", "how.attempts[1].step"),
        (("prepared",), [HOW["prepared"][0]] * 17, "how.prepared"),
        (("prepared", 0, "command"), "c" * 301, "how.prepared[0].command"),
        (("prepared", 1, "ok"), "no", "how.prepared[1].ok"),
        (("repairs",), [HOW["repairs"][0]] * 4, "how.repairs"),
        (("repairs", 0, "round"), 0, "how.repairs[0].round"),
        (("repairs", 0, "modules"), ["m"] * 11, "how.repairs[0].modules"),
        (("repairs", 1, "unresolved", 0), {"name": "x"}, "how.repairs[1].unresolved[0]"),
    ],
)
def test_a_forged_report_is_refused_naming_the_field(path, value, named):
    with pytest.raises(ValueError) as refused:
        read_how(forged(path, value))
    assert str(refused.value).startswith(named + " ")


def test_each_fallback_and_repair_round_is_a_row():
    failures = Failures("u")
    failures.extend(repo_input(RepoSpec("lib", "/x", "main")), report_how(read_how(copy.deepcopy(HOW))))
    rows = [(row["stage"], row["error_type"], row["message"]) for row in failures.rows]
    assert [(stage, error_type) for stage, error_type, _ in rows] == [
        ("install", "InstallFallback"),
        ("install", "InstallFallback"),
        ("install", "PrepareCommandFailed"),
        ("install", "MissingModuleInstalled"),
        ("install", "MissingModuleUnresolved"),
    ]
    step, editable, prepared, installed, unresolved = (message for _, _, message in rows)
    assert "'{envpython} scripts/generate.py'" in prepared and "commands_pre" in prepared
    assert step.startswith("repository 'lib': installing pytest, the package and its test requirements")
    assert "six==0.0.1" in step and step.endswith(
        "installed with every test requirement relaxed to its bare name (no version pins)"
    )
    assert "'build_editable' hook" in editable and "regular package" in editable
    assert "yaml, --cov" in installed and installed.endswith("installed PyYAML, pytest-cov")
    assert "(repair round 2)" in unresolved and "nosuch" in unresolved
    assert report_how(read_how(manifest_how())) == []
