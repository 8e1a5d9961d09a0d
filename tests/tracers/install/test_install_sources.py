"""Reading a repository's test requirements as its CI would (tracers/install/sources.py, requirements.py, tox.py,
nox.py): pure parsing, no pip.

Each case writes real files into a temporary repository and reads it; hostile files (huge, malformed, cyclic,
wrong types, links out of the repository, a noxfile that would act if it ran) must never raise.
"""

import os

import pytest
from repo_fixtures import write_files

from tracers.install.requirements import relax, relaxed_lines
from tracers.install.sources import MAX_FILE_BYTES, MAX_LINES, Reader, dependency_group, read_sources
from tracers.install.tox import factors_match, tox_envs

PY311 = (3, 11)


def sources_of(tmp_path, files: dict[str, str], is_package: bool = True):
    write_files(tmp_path, files)
    sources, notes = read_sources(str(tmp_path), is_package, PY311)
    return {source.label: (source.lines, source.extras) for source in sources}, notes


PYPROJECT = """
    [project]
    name = "My_Pkg"
    version = "0.1"
    """


def test_every_kind_is_read_in_the_documented_order(tmp_path):
    found, notes = sources_of(
        tmp_path,
        {
            "pyproject.toml": PYPROJECT
            + """
            [project.optional-dependencies]
            dev = ["ruff"]
            testing = ["iniconfig>=1", "my-pkg[fast]"]
            fast = ["toolz ; python_version >= '3.8'"]

            [dependency-groups]
            Tests = ["six", {include-group = "base"}]
            base = ["tomli==2.0.1", "my_pkg[fast]"]

            [tool.hatch.envs.default]
            dependencies = ["coverage"]

            [tool.hatch.envs.test]
            extra-dependencies = ["hypothesis", "{root:uri}/vendored"]
            """,
            "requirements-dev.txt": "six==0.0.1\n",
            "requirements-docs.txt": "sphinx\n",
            "requirements/test.txt": "-r base.txt\npytest-mock==3.0 --hash=sha256:abc\n--index-url https://elsewhere/\n",
            "requirements/base.txt": "packaging  # a comment\n",
            "tox.ini": "[testenv]\ndeps = attrs\n",
            "noxfile.py": "import nox\n\n@nox.session\ndef tests(session):\n    session.install('pytest-xdist')\n",
        },
    )
    assert list(found) == [
        "dependency-groups:Tests",
        "extra:testing",
        "requirements:requirements-dev.txt",
        "requirements:requirements/test.txt",
        "tox:testenv",
        "hatch:test",
        "nox:tests",
    ]
    assert found["dependency-groups:Tests"] == (["six", "tomli==2.0.1"], ["fast"])  # the package's own extra
    assert found["extra:testing"] == (["iniconfig>=1", "toolz ; python_version >= '3.8'"], ["testing"])
    assert found["requirements:requirements/test.txt"] == (["packaging", "pytest-mock==3.0"], [])
    assert found["hatch:test"] == (["coverage", "hypothesis"], [])  # default's, its own; `{...}` skipped
    assert notes == []


def test_poetry_pdm_and_uv_groups_are_read_after_pep_735_and_before_extras(tmp_path):
    found, notes = sources_of(
        tmp_path,
        {
            "pyproject.toml": """
            [tool.poetry]
            name = "poetic"
            version = "1.0.0"

            [tool.poetry.dependencies]
            python = "^3.9"

            [tool.poetry.group.lint.dependencies]
            ruff = "*"

            [tool.poetry.group.Test.dependencies]
            python = "^3.9"
            pytest = "^7.4"
            hypothesis = {version = "~6.82", extras = ["cli"], markers = "python_version >= '3.9'"}
            legacy = "0.2"
            local = {path = "../local", develop = true}
            forked = {git = "https://example.invalid/forked.git"}
            either = [{version = "^1", python = "<3.10"}, {version = "^2", python = ">=3.10"}]
            poetic = {version = "*", extras = ["fast"]}
            oddity = "^1 || ^2"

            [tool.pdm.dev-dependencies]
            lint = ["ruff"]
            test = ["pytest-mock>=3", "-e file:///${PROJECT_ROOT}/plugins/one"]

            [tool.uv]
            dev-dependencies = ["anyio>=4"]

            [project.optional-dependencies]
            tests = ["toolz"]
            """,
        },
    )
    assert list(found) == ["poetry:Test", "pdm:test", "uv:dev-dependencies", "extra:tests"]
    assert found["poetry:Test"] == (
        [
            "pytest>=7.4,<8",
            "hypothesis[cli]>=6.82,<6.83 ; python_version >= '3.9'",
            "legacy==0.2",
            "either",
            "oddity",
        ],
        ["fast"],  # the project's own extra, named through [tool.poetry] name
    )
    assert found["pdm:test"] == (["pytest-mock>=3"], [])
    assert found["uv:dev-dependencies"] == (["anyio>=4"], [])
    assert notes == []


def test_poetry_s_legacy_dev_dependencies_when_it_has_no_groups(tmp_path):
    found, _ = sources_of(
        tmp_path, {"pyproject.toml": '[tool.poetry.dev-dependencies]\npytest = "^6.0"\nsix = ">=1.5 <2"\n'}
    )
    assert found == {"poetry:dev-dependencies": (["pytest>=6.0,<7", "six>=1.5,<2"], [])}


def test_a_non_package_reads_requirements_txt_and_no_extra(tmp_path):
    found, _ = sources_of(
        tmp_path,
        {
            "setup.cfg": "[options.extras_require]\ntest = toolz\n",
            "requirements.txt": "six\n",
            "tests/requirements.txt": "iniconfig\n",
        },
        is_package=False,
    )
    assert found == {
        "requirements:requirements.txt": (["six"], []),
        "requirements:tests/requirements.txt": (["iniconfig"], []),
    }


def test_setup_cfg_extras_count_when_pyproject_has_none(tmp_path):
    found, _ = sources_of(
        tmp_path,
        {
            "setup.cfg": "[metadata]\nname = cfgpkg\n\n[options.extras_require]\ndev = ruff\ntests =\n    toolz\n"
            "    cfgpkg[more]\nmore = six\n",
            "setup.py": "from setuptools import setup\nsetup()\n",
        },
    )
    assert found == {"extra:tests": (["toolz", "six"], ["tests"])}


def test_dependency_groups_expand_includes_and_refuse_cycles(tmp_path):
    groups = {
        "test": ["a", {"include-group": "Shared.Base"}, 3, {"include-group": "base", "other": 1}, {"x": "y"}],
        "shared-base": ["b", {"include-group": "leaf"}],
        "leaf": ["c"],
        "loop-a": [{"include-group": "loop_b"}],
        "loop-b": ["d", {"include-group": "loop-a"}],
        "scalar": "e",
    }
    assert dependency_group(groups, "test") == ["a", "b", "c"]  # non-string items are skipped
    with pytest.raises(ValueError, match="cycle loop-a -> loop-b -> loop-a"):
        dependency_group(groups, "loop-a")
    with pytest.raises(ValueError, match="not a list"):
        dependency_group(groups, "scalar")
    with pytest.raises(ValueError, match="not defined"):
        dependency_group({"test": [{"include-group": "missing"}]}, "test")
    diamond = {f"g{n}": [{"include-group": f"g{n + 1}"}, {"include-group": f"g{n + 1}"}] for n in range(40)}
    diamond["g40"] = ["x"]
    with pytest.raises(ValueError, match="more than|deeper than"):  # 2**40 entries: refused, not computed
        dependency_group(diamond, "g0")
    found, notes = sources_of(
        tmp_path,
        {"pyproject.toml": '[dependency-groups]\ntest = [{include-group = "dev"}]\ndev = [{include-group = "test"}]\n'},
    )
    assert found == {} and notes == ["dependency-groups:test: include-group cycle test -> dev -> test"]


def test_requirement_files_inline_r_keep_c_and_drop_options(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("stolen\n")
    repo = tmp_path / "repo"
    found, notes = sources_of(
        repo,
        {
            "pyproject.toml": PYPROJECT,
            "dev-requirements.txt": "-e .[fast]\n-r requirements/base.txt\n-c constraints.txt\n"
            "--requirement=../outside.txt\n-r dev-requirements.txt\nsix>=1 \\\n  ; python_version >= '3'\n"
            "git+https://example.org/x.git#egg=x\n-e ./vendor/thing\n--extra-index-url https://elsewhere/\n",
            "requirements/base.txt": "attrs\n",
            "constraints.txt": "attrs<99\n",
        },
    )
    (lines, extras) = found["requirements:dev-requirements.txt"]
    assert extras == ["fast"]  # `-e .[fast]` is the package itself: its extra, not a requirement
    assert lines[0] == "attrs" and lines[1] == "-c " + os.path.realpath(repo / "constraints.txt")
    assert "six>=1   ; python_version >= '3'" in lines and "-e ./vendor/thing" in lines
    assert "stolen" not in lines and not any("elsewhere" in line for line in lines)
    assert any("outside.txt" in note for note in notes)
    assert lines.count("attrs") <= 6  # `-r` of itself stops at MAX_DEPTH


def test_tox_reads_the_test_env_of_this_python(tmp_path):
    found, _ = sources_of(
        tmp_path,
        {
            "pyproject.toml": PYPROJECT,
            "tox.ini": """
                [tox]
                envlist = lint, py{310,311}-django{42}, docs

                [base]
                deps = attrs

                [testenv]
                deps =
                    {[base]deps}
                    -r{toxinidir}/ci/test.txt
                    py310: only-310
                    py311,py312: for-311
                    !py311: not-311
                    django42: Django>=4.2,<5
                    py311-django50: wrong-django
                    -e {toxinidir}[testing]
                    {env:UNSET:fallback}

                [testenv:lint]
                deps = ruff
                """,
            "ci/test.txt": "iniconfig\n",
        },
    )
    assert found == {"tox:testenv": (["attrs", "iniconfig", "for-311", "Django>=4.2,<5"], ["testing"])}


def test_tox_env_sections_setup_cfg_and_legacy_tox_ini(tmp_path):
    assert tox_envs("py{38,39}-{unit,int}, lint\npypy3") == [
        "py38-unit",
        "py38-int",
        "py39-unit",
        "py39-int",
        "lint",
        "pypy3",
    ]
    assert factors_match("py311,py312", {"py311"}) and not factors_match("!py311", {"py311"})
    assert factors_match("py3{10,11}-x", {"py311", "x"}) and not factors_match("py311-y", {"py311"})
    found, _ = sources_of(
        tmp_path / "a",
        {"tox.ini": "[tox]\nenvlist = py311\n[testenv]\ndeps = base\n[testenv:py{310,311}]\ndeps = own\n"},
    )
    assert found == {"tox:testenv:py311": (["own"], [])}
    found, _ = sources_of(
        tmp_path / "b",
        {"setup.cfg": "[tox:tox]\nenvlist = py311\n\n[testenv]\ndeps = pytest-mock\n"},
    )
    assert found == {"tox:testenv": (["pytest-mock"], [])}
    found, _ = sources_of(
        tmp_path / "c",
        {"pyproject.toml": '[tool.tox]\nlegacy_tox_ini = """\n[testenv]\ndeps = hypothesis\n"""\n'},
    )
    assert found == {"tox:testenv": (["hypothesis"], [])}


def test_tox_commands_pre_of_the_test_env_as_the_install_runs_them(tmp_path):
    write_files(
        tmp_path,
        {
            "tox.ini": """
                [tox]
                envlist = lint, py311

                [testenv]
                commands_pre =
                    {[prep]commands}
                    py310: only-310 --flag
                    - coverage erase
                    pybabel compile \\
                        --directory {toxinidir}/locale {posargs:--quiet}
                    python -c "import os; print(os.environ.get('X', '{env:X:none}'))"
                    cp {envsitepackagesdir}/x .
                    python -c "unbalanced
                commands = pytest {posargs}

                [prep]
                commands = {envpython} -m tool {envbindir} {envdir}
                """
        },
    )
    commands = Reader(str(tmp_path), python=(3, 11)).prepare_commands("/venv")
    src = os.path.realpath(tmp_path)
    assert commands == [
        (["/venv/bin/python", "-m", "tool", "/venv/bin", "/venv"], False, "{envpython} -m tool {envbindir} {envdir}"),
        (["coverage", "erase"], True, "coverage erase"),
        (
            ["pybabel", "compile", "--directory", f"{src}/locale", "--quiet"],
            False,
            "pybabel compile --directory {toxinidir}/locale {posargs:--quiet}",
        ),
        (
            ["python", "-c", "import os; print(os.environ.get('X', 'none'))"],
            False,
            "python -c \"import os; print(os.environ.get('X', '{env:X:none}'))\"",
        ),
    ]  # the py310 line, a variable only tox knows and a line that does not split are left out
    assert Reader(str(tmp_path / "nothing")).prepare_commands("/venv") == []


def test_hatch_test_envs(tmp_path):
    found, _ = sources_of(
        tmp_path / "a",
        {
            "pyproject.toml": '[tool.hatch.envs.hatch-test]\nextra-dependencies = ["six"]\n'
            '[tool.hatch.envs.default]\ndependencies = ["never"]\n'
        },
    )
    assert found == {"hatch:hatch-test": (["six"], [])}  # hatch-test does not inherit default's
    found, _ = sources_of(
        tmp_path / "b", {"pyproject.toml": '[tool.hatch.envs.test]\ndependencies = ["own", 4, ["x"]]\n'}
    )
    assert found == {"hatch:test": (["own"], [])}


def test_nox_literals_are_read_and_the_noxfile_never_runs(tmp_path):
    found, _ = sources_of(
        tmp_path,
        {
            "noxfile.py": f"""
                import nox
                open({str(tmp_path / "ran")!r}, "w").write("the noxfile ran")

                DEPS = ["never-read"]

                @nox.session
                def lint(session):
                    session.install("ruff")

                @nox.session(name="unit-tests", python=["3.11"])
                def run_them(s):
                    s.install("-r", "requirements-dev.txt", "--upgrade", "-e", ".[test]")
                    s.install(*DEPS, "pytest-xdist", 3)
                    other.install("not-the-session")
                """,
            "requirements-dev.txt": "six\n",
        },
    )
    assert found["nox:unit-tests"] == (["six", "pytest-xdist"], ["test"])
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "line, relaxed",
    [
        ("six==0.0.1", "six"),
        ("Six[extra1, b] >= 1.0, <2", "Six[extra1, b]"),
        ("pytest (>=7)", "pytest"),
        ("foo==1; python_version < '3.8'", "foo; python_version < '3.8'"),
        (
            'bar>1 ; sys_platform == "win32" or python_version >= "3"',
            'bar; sys_platform == "win32" or python_version >= "3"',
        ),
        ("baz==2; extra == 'test'", "baz"),
        ("qux @ https://example.org/qux-1.0.whl ; os_name == 'posix'", "qux; os_name == 'posix'"),
        ("-e ./vendor/x", None),
        ("-c /src/constraints.txt", None),
        ("./local/path", None),
        ("https://example.org/x-1.0.whl", None),
        ("git+https://example.org/x.git", None),
        ("name: not a requirement", None),
    ],
)
def test_relax_keeps_the_name_and_environment_markers(line, relaxed):
    assert relax(line) == relaxed


def test_relaxed_lines_are_unique_across_sources(tmp_path):
    found, _ = sources_of(tmp_path, {"requirements-dev.txt": "six==1\ntoolz\n", "tox.ini": "[testenv]\ndeps = six>2\n"})
    assert found and relaxed_lines(read_sources(str(tmp_path), True, PY311)[0]) == ["six", "toolz"]


def test_hostile_files_never_raise(tmp_path):
    huge = "[dependency-groups]\ntest = [" + '"x",' * (MAX_FILE_BYTES // 4) + "]\n"
    cases = {
        "huge": {"pyproject.toml": huge},
        "bad-toml": {"pyproject.toml": "[project\nname = ", "setup.cfg": "[options.extras_require\ntest"},
        "deep-toml": {"pyproject.toml": "x = " + "[" * 5000 + "]" * 5000 + "\n"},
        "types": {
            "pyproject.toml": '"dependency-groups" = 3\n[project]\nname = 7\n'
            '"optional-dependencies" = {test = [1, {a = 1}]}\n'
            "[tool.hatch]\nenvs = []\n[tool.tox]\nlegacy_tox_ini = 5\n"
        },
        "groups-not-table": {"pyproject.toml": 'dependency-groups = ["test"]\n'},
        "tox-garbage": {"tox.ini": "\x00\x01[testenv\ndeps\n= {[testenv]deps}{[testenv]deps}\n[testenv]\n"},
        "tox-self-reference": {"tox.ini": "[testenv]\ndeps = {[testenv]deps}{[testenv]deps}x\n"},
        "nox-null": {"noxfile.py": "import nox\x00\n"},
        "nox-deep": {"noxfile.py": "x = " + "(" * 10000 + ")" * 10000 + "\n"},
        "many-lines": {"requirements-dev.txt": "".join(f"p{n}\n" for n in range(MAX_LINES * 3))},
        "long-line": {"requirements-dev.txt": "x" * (MAX_FILE_BYTES - 10) + "\n"},
        "bad-utf8": {"requirements-dev.txt": "\udcff\n"},
    }
    for name, files in cases.items():
        repo = tmp_path / name
        repo.mkdir()
        for path, text in files.items():
            target = repo / path
            target.write_bytes(text.encode("utf-8", "surrogateescape"))
        sources, notes = read_sources(str(repo), True, PY311)  # never raises
        assert all(len(source.lines) <= MAX_LINES for source in sources), name
        assert all(len(line) <= 1000 for source in sources for line in source.lines), name
    (tmp_path / "link").mkdir()
    os.symlink(tmp_path / "huge" / "pyproject.toml", tmp_path / "link" / "requirements-dev.txt")
    assert read_sources(str(tmp_path / "link"), True, PY311)[0] == []  # a link out of the repository is not read
