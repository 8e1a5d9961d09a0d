"""A suite larger than `--tests-per-unit` is planned as several units by test module (pipeline/stages/repos/pieces.py):
the modules pytest would collect are found from the checkout's files alone, cut into ranges, and the pieces
together run every test once, with the traces of the whole run."""

import os
import shutil
import tempfile
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import repo_fixtures as fixtures

from pipeline.engine.job import run_job
from pipeline.kinds.repos import ReposConfig, ReposKind
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.pieces import TestModule, count_tests, cut_ranges, repo_pieces, suite_modules
from pipeline.stages.trajectories import SamplingSettings

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_test_modules_are_what_pytest_collects_by_default(tmp_path):
    write(
        tmp_path,
        {
            "tests/test_a.py": "def test_one(): pass\ndef test_two(): pass\n",
            "tests/sub/b_test.py": "class TestB:\n    def test_x(self): pass\n    def helper(self): pass\n",
            "tests/helpers.py": "def test_not_collected(): pass\n",
            "build/test_built.py": "def test_x(): pass\n",
            ".tox/test_hidden.py": "def test_x(): pass\n",
            "env/pyvenv.cfg": "",
            "env/test_in_venv.py": "def test_x(): pass\n",
        },
    )
    os.symlink("/etc/passwd", tmp_path / "tests" / "test_link.py")
    os.mkfifo(tmp_path / "tests" / "test_fifo.py")  # read, it would block the planner for ever
    assert suite_modules(str(tmp_path)) == [TestModule("tests/sub/b_test.py", 1), TestModule("tests/test_a.py", 2)]


def test_the_configuration_pytest_reads_chooses_the_files_and_paths(tmp_path):
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["checks"]\npython_files = ["check_*.py"]\n',
            "checks/check_a.py": "def test_one(): pass\n",
            "checks/test_b.py": "def test_one(): pass\n",
            "tests/check_c.py": "def test_one(): pass\n",
        },
    )
    assert [module.path for module in suite_modules(str(tmp_path)) or []] == ["checks/check_a.py"]
    write(tmp_path, {"pytest.ini": "[pytest]\npython_files = checks/*.py\n"})  # pytest.ini wins; not a plain glob
    assert suite_modules(str(tmp_path)) is None


def test_tests_are_counted_from_the_syntax_tree(tmp_path):
    write(
        tmp_path,
        {
            "test_count.py": (
                "import pytest\n"
                "@pytest.mark.parametrize('x', [1, 2, 3])\n"
                "def test_three(x): pass\n"
                "async def test_async(): pass\n"
                "class TestCase:\n"
                "    @pytest.mark.parametrize('a,b', [(1, 2), (3, 4)])\n"
                "    def test_pairs(self, a, b): pass\n"
                "def helper(): pass\n"
            ),
            "test_broken.py": "def test_(:\n",
        },
    )
    assert count_tests(str(tmp_path / "test_count.py")) == 3 + 1 + 2
    assert count_tests(str(tmp_path / "test_broken.py")) == 1


def modules(*counts: int) -> list[TestModule]:
    return [TestModule(f"tests/test_{k}.py", n) for k, n in enumerate(counts)]


def test_ranges_close_once_they_hold_the_tests_per_unit():
    ranges = cut_ranges(modules(3, 3, 3, 10, 1), 6)
    assert [[m.path[-4] for m in chosen] for chosen in ranges] == [["0", "1"], ["2", "3"], ["4"]]


def test_pieces_run_every_test_once_and_explicit_arguments_are_never_split(tmp_path):
    write(tmp_path, {f"tests/test_{k}.py": "".join(f"def test_{n}(): pass\n" for n in range(4)) for k in range(5)})
    spec = RepoSpec(name="many", url="file:///many", ref="main")
    pieces = repo_pieces(spec, str(tmp_path), "c" * 40, 8)
    assert [piece.piece for piece in pieces] == ["1/3", "2/3", "3/3"]
    assert all(piece.ref == "c" * 40 for piece in pieces)  # cut at that commit, so run at it
    assert pieces[0].test == ("--ignore=tests/test_2.py", "--ignore=tests/test_3.py", "--ignore=tests/test_4.py")
    assert pieces[1].test == ("tests/test_2.py", "tests/test_3.py") and pieces[2].test == ("tests/test_4.py",)
    assert repo_pieces(spec, str(tmp_path), "c" * 40, 20) == [spec]  # 20 tests: one unit
    assert repo_pieces(spec, str(tmp_path), "c" * 40, 0) == [spec]
    chosen = RepoSpec(name="many", url="file:///many", ref="main", test=("tests/test_0.py",))
    assert repo_pieces(chosen, str(tmp_path), "c" * 40, 8) == [chosen]
    assert "piece" not in repr(spec) and "piece='2/3'" in repr(pieces[1])  # whole repositories' keys unchanged


MANY = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "many"
        version = "0.1.0"

        [tool.pytest.ini_options]
        addopts = "--doctest-modules"
        """,
    "src/many/__init__.py": '''
        def double(x):
            """
            >>> double(2)
            4
            """
            return 2 * x
        ''',
    **{
        f"tests/test_part{k}.py": "from many import double\n\n"
        + "".join(f"def test_{k}_{n}():\n    assert double({k * 10 + n}) == {2 * (k * 10 + n)}\n\n" for n in range(4))
        for k in range(5)
    },
}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_split_suite_traces_what_the_whole_one_does(tmp_path, ray_local):
    origin = tmp_path / "many"
    fixtures.make_repo(origin, MANY)
    manifest = tmp_path / "repos.toml"
    manifest.write_text(f'[[repo]]\nname = "many"\nurl = "{origin}"\nref = "main"\n')
    tables = {}
    for tests_per_unit in (0, 8):
        out = tmp_path / f"out-{tests_per_unit}"
        config = ReposConfig(
            sampling=SamplingSettings(per_trace=1),
            tests_per_unit=tests_per_unit,
            cache_dir=str(tmp_path / "cache"),
            pip_cache_dir=PIP_CACHE,
        )
        run_job(ReposKind(), str(manifest), config, str(out))
        tables[tests_per_unit] = {
            name: ds.dataset(out / name, format="parquet").to_table().to_pylist() for name in ("traces", "repo_runs")
        }
    whole, split = tables[0], tables[8]
    assert [row["unit_id"] for row in split["repo_runs"]] == [f"repo-00000-many-{k}of3" for k in (1, 2, 3)]
    assert [row["piece"] for row in split["repo_runs"]] == ["1/3", "2/3", "3/3"]
    assert whole["repo_runs"][0]["piece"] is None
    for count in ("tests_collected", "tests_passed_untraced", "tests_traced"):
        assert sum(row[count] for row in split["repo_runs"]) == whole["repo_runs"][0][count] == 21, count
    assert sorted({row["test_id"] for row in split["traces"]}) == sorted({row["test_id"] for row in whole["traces"]})
    assert any("many.double" in row["test_id"] for row in split["traces"])  # the doctest ran, in the first piece
    assert {row["trace_id"] for row in split["traces"]} == {row["trace_id"] for row in whole["traces"]}


def test_a_repository_the_planner_cannot_read_stays_one_unit(tmp_path, monkeypatch):
    """Whatever goes wrong while planning a repository (its clone, its files), the plan goes on: the repository
    is one unit, whose task then meets the problem and records it as any unit does."""
    from pipeline.kinds import repos as repos_kind

    spec = RepoSpec(name="odd", url=str(tmp_path / "nowhere"), ref="main")
    config = ReposConfig(cache_dir=str(tmp_path / "cache"))
    assert repos_kind.plan_repo(spec, config) == [spec]  # the clone fails

    def unreadable(*_):
        raise PermissionError("a file the planner may not read")

    origin = tmp_path / "many"
    fixtures.make_repo(origin, MANY)
    monkeypatch.setattr(repos_kind, "repo_pieces", unreadable)
    readable = RepoSpec(name="many", url=str(origin), ref="main")
    config = ReposConfig(cache_dir=str(tmp_path / "cache"), tests_per_unit=8)
    assert repos_kind.plan_repo(readable, config) == [readable]


def test_a_refresh_plans_the_same_pieces_under_the_same_keys_until_the_commit_moves(tmp_path, ray_local):
    from pipeline.refresh.plan import repo_units as refresh_units

    origin = tmp_path / "many"
    fixtures.make_repo(origin, MANY)
    spec = RepoSpec(name="many", url=str(origin), ref="main")
    config = ReposConfig(cache_dir=str(tmp_path / "cache"), tests_per_unit=8)
    first, again = refresh_units([spec], config), refresh_units([spec], config)
    assert [unit.key for unit in first] == [unit.key for unit in again] and len(set(u.key for u in first)) == 3
    assert [unit.unit_id.rsplit("-", 1)[1] for unit in first] == ["1of3", "2of3", "3of3"]
    fixtures.commit(origin, {"tests/test_part9.py": "def test_new():\n    pass\n"}, "one more module")
    moved = refresh_units([spec], config)
    assert not {unit.key for unit in moved} & {unit.key for unit in first}  # a new commit: every piece again
