"""The default install reads test requirements as CI would, falls back when they cannot be resolved, and
repairs modules collection finds missing — whole repos stage, real pip against the real index, bwrap.

Each fixture repository below is a real git repository whose tests need something only the new rules
install; `trace_repo` runs it end to end (clone, install, trace, cut) and the test asserts the traces of those
tests, the failure rows, and install_repo's `how` (the real install_repo, wrapped only to keep what it returned).
"""

import os
import shutil
import tempfile
from dataclasses import dataclass

import pytest
import repo_fixtures as fixtures

from pipeline.sandbox import make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos import trace as trace_stage
from pipeline.stages.repos.install import Installed
from pipeline.stages.repos.suite_run import RepoTraceSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")
DOUBLE = """
    def double(x):
        return x * 2
    """


def project(name: str, tables: str = "", requires: str = '"setuptools>=61"', backend: str = "setuptools.build_meta"):
    """pyproject.toml of package `name`; a backend without a static version reads it from `tables`."""
    version = "" if "dynamic" in tables else 'version = "0.1.0"'
    return f"""
        [build-system]
        requires = [{requires}]
        build-backend = "{backend}"

        [project]
        name = "{name}"
        {version}
        {tables}
        """


def suite_module(module: str, imports: str, call: str, check: str) -> str:
    return f"""
        {imports}

        from {module} import double


        def test_double():
            assert double({call}) == {2 * int(call)} and {check}
        """


REPOS = {
    # test dependencies only in [dependency-groups], through a nested include-group (a second group cycles);
    # its version comes from hatch-vcs, which needs setuptools-scm's pretend version without a package name
    "groups": {
        "pyproject.toml": project(
            "grouped",
            """
            dynamic = ["version"]

            [tool.hatch.version]
            source = "vcs"

            [dependency-groups]
            test = [{include-group = "base"}]
            base = ["six"]
            lint = [{include-group = "cycle"}]
            cycle = [{include-group = "lint"}]
            """,
            '"hatchling", "hatch-vcs"',
            "hatchling.build",
        ),
        "src/grouped/__init__.py": DOUBLE,
        "tests/conftest.py": "import six  # only [dependency-groups] declares it\n",
        "tests/test_grouped.py": suite_module("grouped", "import six", "2", "six.PY3"),
    },
    # tox deps (through -r{toxinidir}/...); a flit backend too old for editable installs: a regular one
    "tox": {
        "pyproject.toml": project("toxed", 'description = "flit_core 3.2"', '"flit_core==3.2.0"', "flit_core.buildapi"),
        "toxed/__init__.py": DOUBLE,
        "tox.ini": """
            [tox]
            envlist = lint, py{310,311,312,313}

            [testenv]
            deps =
                -r{toxinidir}/ci/deps.txt
                py310: tracegen-no-such-distribution
            commands = pytest

            [testenv:lint]
            deps = ruff
            """,
        "ci/deps.txt": "termcolor\n",
        "tests/test_toxed.py": suite_module("toxed", "import termcolor", "3", "termcolor.colored"),
    },
    # setup.cfg extras, and code under lib/ that only an editable install makes importable from the source copy
    "setupcfg": {
        "setup.py": "from setuptools import setup\n\nsetup()\n",
        "setup.cfg": """
            [metadata]
            name = cfgpkg
            version = 0.1.0

            [options]
            package_dir =
                = lib
            packages = find:

            [options.packages.find]
            where = lib

            [options.extras_require]
            testing = toolz
            """,
        "lib/cfgpkg/__init__.py": DOUBLE,
        "tests/test_cfgpkg.py": suite_module("cfgpkg", "import toolz", "4", "toolz.identity(1)"),
    },
    # a dev requirements file with a pin that does not exist: installed without it, the group still counts;
    # its version comes from pdm-backend's scm source
    "pinned": {
        "pyproject.toml": project(  # and a pdm-backend scm version
            "pinned",
            'dynamic = ["version"]\n[tool.pdm.version]\nsource = "scm"\n[dependency-groups]\ntest = ["tomli"]',
            '"pdm-backend"',
            "pdm.backend",
        ),
        "requirements-dev.txt": "six==0.0.1\n",
        "src/pinned/__init__.py": DOUBLE,
        "tests/test_pinned.py": suite_module("pinned", "import tomli", "5", "tomli.loads('a = 1') == {'a': 1}"),
    },
    # not a package; its one requirements file pins what does not exist: relaxed to bare names, a requirement
    # whose marker excludes this Python stays excluded
    "relaxed": {
        "lib/__init__.py": "",
        "lib/code.py": DOUBLE,
        "requirements-test.txt": "six==0.0.1\ntracegen-no-such-distribution==1.0 ; python_version < '3'\n",
        "tests/test_lib.py": suite_module("lib.code", "import six", "9", "six.PY3"),
    },
    # a test imports dateutil, declared nowhere: collection finds it missing, python-dateutil provides it
    "repair": {
        "pyproject.toml": project("repaired"),
        "src/repaired/__init__.py": DOUBLE,
        "tests/test_dates.py": suite_module(
            "repaired", "from dateutil import relativedelta", "6", "relativedelta.relativedelta(days=1).days == 1"
        ),
    },
    # a checkout without tags of a project others depend on: versioned by setuptools-scm, it would build as
    # 0.0.0, and its test requirement's own `six>=1.5` (python-dateutil's) would not resolve; the project's latest
    # release on the index is its version here
    "released": {
        "pyproject.toml": project(
            "six",
            'dynamic = ["version"]\n[tool.setuptools_scm]\n[dependency-groups]\ntest = ["python-dateutil"]',
            '"setuptools>=64", "setuptools-scm>=8"',
        ),
        "src/sixlike/__init__.py": DOUBLE,
        "tests/test_sixlike.py": suite_module(
            "sixlike", "from importlib import metadata", "3", "int(metadata.version('six').split('.')[0]) >= 1"
        ),
    },
    # a data file the package reads is made by tox's commands_pre (as a CI compiles translations before the tests):
    # one command through a {[section]key} reference, one for another Python (skipped), one whose exit status tox
    # ignores (`-`), one that fails (recorded; the install stands)
    "prepared": {
        "pyproject.toml": project("prepped"),
        "src/prepped/__init__.py": """
            import os


            def double(x):
                with open(os.path.join(os.path.dirname(__file__), "data", "factor.txt")) as handle:
                    return x * int(handle.read())
            """,
        "src/prepped/data/factor.src": "2\n",
        "scripts/make_data.py": """
            import pathlib
            import sys

            folder = pathlib.Path(sys.argv[1])
            (folder / "factor.txt").write_text((folder / "factor.src").read_text())
            """,
        "tox.ini": """
            [tox]
            envlist = py3{11,12,13}

            [testenv]
            commands_pre =
                {[testenv:data]commands}
                py310: python -c "raise SystemExit(1)"
                - python -c "raise SystemExit(3)"
                python -c "raise SystemExit(2)"
            commands = pytest {posargs}

            [testenv:data]
            commands = {envpython} scripts/make_data.py {toxinidir}/src/prepped/data
            """,
        "tests/test_prepped.py": suite_module("prepped", "", "3", "True"),
    },
    # not a package: a module nothing on the index provides; the other test is still traced
    "nowhere": {
        "lib/__init__.py": "",
        "lib/code.py": DOUBLE,
        "tests/test_lib.py": suite_module("lib.code", "", "7", "True"),
        "tests/test_nowhere.py": suite_module("lib.code", "import tracegen_no_such_module", "8", "True"),
    },
}


@dataclass
class Run:
    installed: Installed
    src_existed: bool
    traces: list[dict]
    failures: list[dict]

    def calls(self) -> set[tuple[str, str, str]]:
        return {(row["qualname"], row["input"], row["test_id"]) for row in self.traces}

    def rows(self, error_type: str) -> list[str]:
        return [row["message"] for row in self.failures if (row["stage"], row["error_type"]) == ("install", error_type)]


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    """`stage(name)`: the repository traced once per module (each real install costs seconds)."""
    runs: dict[str, Run] = {}
    real_install = trace_stage.install_repo

    def run(name: str) -> Run:
        if name not in runs:
            origin = tmp_path_factory.mktemp("origin") / name
            fixtures.make_repo(origin, REPOS[name])
            kept = []

            def install_repo(*args):
                installed, failures = real_install(*args)
                kept.append(
                    (installed, installed is not None and os.path.isdir(os.path.join(installed.env_dir, "src")))
                )
                return installed, failures

            spec = RepoSpec(name=name, url=str(origin), ref="main", timeout_s=120, test_timeout_s=20)
            cache = GitCache(str(tmp_path_factory.mktemp("git")))
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(trace_stage, "install_repo", install_repo)
                output = trace_stage.trace_repo(
                    spec,
                    make_sandbox("bwrap"),
                    cache,
                    RepoTraceSettings(parity=False),
                    f"u-{name}",
                    pip_cache=PIP_CACHE,
                )
            ((installed, src_existed),) = kept
            runs[name] = Run(installed, src_existed, output.rows("traces"), output.rows("failures"))
        return runs[name]

    return run


def test_dependency_groups_with_a_nested_include_group_are_installed(stage):
    run = stage("groups")
    assert ("double", "x=2", "tests/test_grouped.py::test_double") in run.calls()
    how = run.installed.how
    assert (how.sources, how.step, how.editable, how.repairs, how.collected) == (
        ("dependency-groups:test",),
        "all",
        True,
        (),
        1,
    )
    assert run.failures == []


def test_tox_deps_are_installed_and_a_failed_editable_build_installs_regularly(stage):
    run = stage("tox")
    assert ("double", "x=3", "tests/test_toxed.py::test_double") in run.calls()
    how = run.installed.how
    assert (how.sources, how.step, how.editable, how.collected) == (("tox:testenv",), "all", False, 1)
    assert [(attempt.step, attempt.editable, attempt.ok) for attempt in how.attempts] == [
        ("all", True, False),
        ("all", False, True),
    ]
    assert "build_editable" in how.attempts[0].error
    (editable,) = run.rows("InstallFallback")
    assert "'tox'" in editable and "regular package" in editable


def test_tox_commands_pre_prepare_the_tree_the_tests_run_in(stage):
    run = stage("prepared")
    (row,) = [row for row in run.traces if row["test_id"] == "tests/test_prepped.py::test_double"]
    assert (row["qualname"], row["input"], row["exit"], row["events"][-1]["arg"]) == ("double", "x=3", "normal", "6")
    assert [(command.command, command.ok) for command in run.installed.how.prepared] == [
        ("{envpython} scripts/make_data.py {toxinidir}/src/prepped/data", True),  # as written, the same everywhere
        ('python -c "raise SystemExit(3)"', True),
        ('python -c "raise SystemExit(2)"', False),
    ]
    (failed,) = run.rows("PrepareCommandFailed")
    assert "raise SystemExit(2)" in failed and "commands_pre" in failed


def test_setup_cfg_extras_and_a_lib_layout_import_from_the_source_copy(stage):
    run = stage("setupcfg")
    (row,) = [row for row in run.traces if row["test_id"] == "tests/test_cfgpkg.py::test_double"]
    assert (row["qualname"], row["input"], row["path"]) == ("double", "x=4", "lib/cfgpkg/__init__.py")
    how = run.installed.how
    assert (how.sources, how.step, how.editable) == (("extra:testing",), "all", True)
    assert run.failures == []


def test_a_checkout_without_tags_gets_its_released_version_so_its_dependents_resolve(stage):
    run = stage("released")
    assert ("double", "x=3", "tests/test_sixlike.py::test_double") in run.calls()
    how = run.installed.how
    assert (how.sources, how.step, how.editable) == (("dependency-groups:test",), "all", True)
    assert [row["message"] for row in run.failures] == []


def test_an_impossible_pin_falls_back_without_its_file(stage):
    run = stage("pinned")
    assert ("double", "x=5", "tests/test_pinned.py::test_double") in run.calls()  # tomli: from the group
    how = run.installed.how
    assert how.sources == ("dependency-groups:test", "requirements:requirements-dev.txt")
    assert how.step == "without:requirements:requirements-dev.txt" and how.editable is True
    assert [(attempt.step, attempt.ok) for attempt in how.attempts] == [
        ("all", False),
        ("without:requirements:requirements-dev.txt", True),
    ]
    (fallback,) = run.rows("InstallFallback")
    assert "'pinned'" in fallback and "six==0.0.1" in fallback
    assert fallback.endswith("installed without requirements:requirements-dev.txt")


def test_an_unresolvable_single_source_is_relaxed_to_bare_names(stage):
    run = stage("relaxed")
    assert ("double", "x=9", "tests/test_lib.py::test_double") in run.calls()
    how = run.installed.how
    assert (how.sources, how.step, how.editable) == (("requirements:requirements-test.txt",), "relaxed", None)
    assert [(attempt.step, attempt.ok) for attempt in how.attempts] == [("all", False), ("relaxed", True)]
    (fallback,) = run.rows("InstallFallback")
    assert "'relaxed'" in fallback and fallback.endswith("relaxed to its bare name (no version pins)")


def test_a_module_whose_distribution_has_another_name_is_repaired(stage):
    run = stage("repair")
    assert ("double", "x=6", "tests/test_dates.py::test_double") in run.calls()
    how = run.installed.how
    assert how.step == "all" and how.collected == 1
    assert [(r.round, r.modules, r.installed, r.unresolved, r.ok) for r in how.repairs] == [
        (1, ("dateutil",), ("python-dateutil",), (), True)
    ]
    (repaired,) = run.rows("MissingModuleInstalled")
    assert "'repair'" in repaired and "dateutil" in repaired and "python-dateutil" in repaired


def test_a_module_nothing_provides_is_recorded_and_the_rest_is_traced(stage):
    run = stage("nowhere")
    assert run.src_existed  # not a package, yet env/src is there for the test run
    assert ("double", "x=7", "tests/test_lib.py::test_double") in run.calls()
    how = run.installed.how
    assert (how.sources, how.step, how.editable, how.collected) == ((), "all", None, 1)
    assert [(r.modules, r.installed, r.unresolved, r.ok) for r in how.repairs] == [
        (("tracegen_no_such_module",), (), ("tracegen_no_such_module",), False)
    ]
    (unresolved,) = run.rows("MissingModuleUnresolved")
    assert "'nowhere'" in unresolved and "tracegen_no_such_module" in unresolved
    assert not run.rows("InstallFailed") and not run.rows("InstallFallback")
