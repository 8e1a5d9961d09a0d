"""What a collection run reports missing, and which distribution provides it (tracers/install/repair.py).

The outputs are real: pytest's own `--collect-only -q` over small trees (this venv's pytest), except where a
module this venv has (yaml, google.protobuf) must look missing, which uses pytest's exact error layout.
"""

import os
import subprocess
import sys

from repo_fixtures import write_files

from tracers.install.repair import MAX_MISSING, collected, declared, distribution, missing, own_modules
from tracers.install.sources import Reader


def collect(tmp_path, files: dict[str, str]) -> str:
    write_files(tmp_path, files)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_modules_missing_from_test_modules_and_their_count(tmp_path):
    output = collect(
        tmp_path,
        {
            "mylib/__init__.py": "import tracegen_absent_inner\n",
            "tests/test_a.py": "import tracegen_absent_a\n\ndef test_a():\n    pass\n",
            "tests/test_b.py": "from tracegen_absent_b.sub import thing\n\ndef test_b():\n    pass\n",
            "tests/test_c.py": "import mylib\n\ndef test_c():\n    pass\n",
            "tests/test_d.py": "import os.tracegen_absent\n\ndef test_d():\n    pass\n",
            "tests/test_ok.py": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
        },
    )
    own = own_modules(str(tmp_path))
    assert {"mylib", "test_a", "test_ok"} <= own
    assert missing(output, own) == [
        ("tracegen_absent_a", "tracegen_absent_a"),
        ("tracegen_absent_b", "tracegen_absent_b"),
        ("tracegen_absent_inner", "tracegen_absent_inner"),  # mylib's own import: missing, mylib is not
    ]  # `os.tracegen_absent`: os is the standard library's
    assert collected(output) == 2


def test_a_conftest_that_fails_to_import(tmp_path):
    output = collect(
        tmp_path,
        {"tests/conftest.py": "import tracegen_absent_conftest.plugin\n", "tests/test_a.py": "def test_a(): pass\n"},
    )
    assert "ImportError while loading conftest" in output
    assert missing(output) == [("tracegen_absent_conftest", "tracegen_absent_conftest")]
    assert collected(output) is None  # the run stopped before collecting anything


def test_plugin_options_and_ini_keys_name_their_plugin(tmp_path):
    output = collect(
        tmp_path,
        {
            "pytest.ini": "[pytest]\naddopts = --reruns=2 --timeout 5 --benchmark-skip\n",
            "tests/test_a.py": "def test_a():\n    pass\n",
        },
    )
    assert missing(output) == [
        ("--reruns", "pytest-rerunfailures"),
        ("--timeout", "pytest-timeout"),
        ("--benchmark-skip", "pytest-benchmark"),
    ]
    output = collect(
        tmp_path / "ini",
        {"pytest.ini": "[pytest]\nasyncio_mode = auto\n", "tests/test_a.py": "def test_a():\n    pass\n"},
    )
    assert missing(output) == [("ini:asyncio_mode", "pytest-asyncio")] and collected(output) == 1


PYTEST_ERROR = """
______________ ERROR collecting tests/test_{name}.py ______________
ImportError while importing test module '/src/tests/test_{name}.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package)
tests/test_{name}.py:3: in <module>
    {statement}
E   ModuleNotFoundError: No module named '{module}'
"""


def error(name, statement, module):
    return PYTEST_ERROR.format(name=name, statement=statement, module=module)


def test_distributions_whose_names_differ_from_the_module():
    output = "".join(
        [
            error("yaml", "import yaml", "yaml"),
            error("dates", "from dateutil.parser import parse", "dateutil"),
            error("proto", "from google.protobuf import json_format", "google"),
            error("cloud", "from google.cloud import storage", "google"),
            error("crypto", "from Crypto.Cipher import AES", "Crypto"),
            error("pkg", "import pkg_resources", "pkg_resources"),
            error("plain", "import toolz.curried", "toolz"),
        ]
    )
    assert missing(output) == [
        ("yaml", "PyYAML"),
        ("dateutil", "python-dateutil"),
        ("google", "protobuf"),  # the statement's dotted name decides; `google.cloud` would not be guessed
        ("Crypto", "pycryptodome"),
        ("pkg_resources", "setuptools"),
        ("toolz", "toolz"),
    ]
    assert distribution("google", "google.cloud.storage") is None
    assert distribution("sklearn") == "scikit-learn" and distribution("cv2") == "opencv-python-headless"
    assert distribution("distutils") == "setuptools"


def test_a_module_the_repository_declares_under_a_longer_name_is_that_distribution(tmp_path):
    """pyparsing's diagrams extra needs `railroad-diagrams`, imported as `railroad`; `railroad` on the index is
    another project. What the repository declares anywhere (dependencies, every extra and group) wins."""
    write_files(
        tmp_path,
        {
            "pyproject.toml": """
            [project]
            name = "parsekit"
            version = "1.0"
            dependencies = ["Jinja2>=3"]

            [project.optional-dependencies]
            diagrams = ["railroad-diagrams", "railroad-diagrams-extra"]
            test = ["parsekit[diagrams]"]

            [dependency-groups]
            docs = ["Sphinx_Rtd_Theme"]
            """
        },
    )
    names = Reader(str(tmp_path)).declared_names()
    assert names == {"jinja2", "railroad-diagrams", "railroad-diagrams-extra", "sphinx-rtd-theme"}
    assert declared("railroad", names) == "railroad-diagrams"  # the shortest of the `railroad-...` names
    assert declared("jinja2", names) == "jinja2" and declared("sphinx_rtd_theme", names) == "sphinx-rtd-theme"
    assert declared("toolz", names) is None


def test_own_modules_of_a_layout(tmp_path):
    write_files(
        tmp_path,
        {
            "src/pkg/__init__.py": "",
            "src/nspkg/mod.py": "",
            "lib/helpers.py": "",
            "tests/yaml/data.py": "",  # a directory without __init__.py below the top is not a package
            "tests/fixtures/pkgdir/__init__.py": "",
            "ext/_speed.cpython-311-x86_64-linux-gnu.so": "",
            ".tox/py311/lib/site.py": "",
        },
    )
    own = own_modules(str(tmp_path))
    assert {"pkg", "nspkg", "mod", "helpers", "data", "pkgdir", "_speed"} <= own
    assert "yaml" not in own and "site" not in own and "tests" not in own
    assert missing(error("own", "import helpers", "helpers"), own) == []


def test_hostile_outputs_are_bounded():
    flood = "".join("No module named 'm%d'\n" % n for n in range(200_000))
    assert len(missing(flood)) == MAX_MISSING
    assert missing("No module named '../../etc'\nNo module named ''\nunrecognized arguments: --\n") == []
    assert collected("3/10 tests collected (7 deselected) in 0.1s") == 3
    assert collected("no tests collected in 0.01s") == 0 and collected("") is None
