"""The Go job end to end on a local Ray: one task per program, the four tables, failures, resume, hashing."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from go_helpers import EXAMPLES, requires_bwrap, requires_go

from pipeline.engine.job import run_job
from pipeline.kinds.go import GoConfig, GoKind, program_units
from pipeline.kinds.rederive_go import RederiveConfig, RederiveKind
from pipeline.stages.go.runs import GoSettings
from schemas import schema_of

pytestmark = [requires_go, requires_bwrap]

SETTINGS = GoSettings(runs=3, timeout_s=1.0)
PROGRAMS = ("sequential", "compile_error", "leaked_select", "two_tests")


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("programs")
    for name in PROGRAMS:
        shutil.copytree(EXAMPLES / name, root / name)
    shutil.copytree(EXAMPLES / "double_lock", root / "group" / "double_lock")
    (root / "libonly").mkdir()
    (root / "libonly" / "lib.go").write_text("package lib\n\nfunc F() int { return 1 }\n")
    (root / "docs").mkdir()
    (root / "docs" / "notes.txt").write_text("not a program")
    return root


@pytest.fixture(scope="module")
def dataset(programs, tmp_path_factory, ray_local):
    out = str(tmp_path_factory.mktemp("go") / "out")
    return out, run_job(GoKind(), str(programs), GoConfig(go=SETTINGS), out, workers=2)


def read(out: str, table: str) -> pl.DataFrame:
    files = sorted(Path(out, table).glob("part-*.parquet"))
    for path in files:
        assert pq.read_schema(path).equals(schema_of(table), check_metadata=False)
    return pl.concat([pl.read_parquet(p) for p in files]) if files else pl.DataFrame()


def test_units_are_one_per_program_in_sorted_order(programs):
    units = program_units(str(programs))
    assert [u.unit_id for u in units] == [
        "go:compile_error",
        "go:docs",
        "go:group/double_lock",
        "go:leaked_select",
        "go:libonly",
        "go:sequential",
        "go:two_tests",
    ]
    assert [u.index for u in units] == list(range(7))


def test_tables_rows_and_failures(dataset):
    out, manifest = dataset
    runs = read(out, "go_runs")
    assert runs.group_by("program_id").len().sort("program_id").rows() == [
        ("compile_error", 1),
        ("group/double_lock", 3),
        ("leaked_select", 3),
        ("libonly", 1),
        ("sequential", 3),
        ("two_tests", 3),
    ]
    statuses = dict(runs.group_by("program_id").agg(pl.col("status").unique()).rows())
    assert statuses["group/double_lock"] == ["deadlock"] and statuses["compile_error"] == ["build_error"]
    failures = read(out, "failures").sort("unit_id")
    assert failures.select("unit_id", "stage", "error_type").rows() == [
        ("go:compile_error", "build", "BuildError"),
        ("go:docs", "read", "NotAGoProgram"),
        ("go:libonly", "build", "NotAGoProgram"),
    ]
    assert manifest["tables"]["go_traces"]["rows"] == 12
    assert manifest["tables"]["go_next_event"]["rows"] == len(read(out, "go_next_event")) > 0
    assert manifest["tables"]["go_trajectories"]["rows"] == len(read(out, "go_trajectories")) > 0
    stats = manifest["stats"]
    assert stats["go_runs"]["in"] == 6 and stats["go_runs"]["out"] == 14 and stats["go_runs"]["events"] > 0
    assert manifest["config"]["go"]["runs"] == 3


def test_every_program_is_stored_with_its_sources_and_every_run_names_it(dataset):
    out, _ = dataset
    programs = read(out, "go_programs")
    assert programs["program_id"].sort().to_list() == [
        "compile_error",
        "group/double_lock",
        "leaked_select",
        "libonly",
        "sequential",
        "two_tests",
    ]
    runs = read(out, "go_runs").join(programs.select("program_id", "program_hash"), on="program_id", suffix="_p")
    assert (runs["program_hash"] == runs["program_hash_p"]).all()
    files = dict(programs.select("program_id", "files").rows())
    assert [f["path"] for f in files["libonly"]] == ["lib.go"]
    assert (EXAMPLES / "sequential" / "main.go").read_text() in [f["text"] for f in files["sequential"]]


def test_rederive_keeps_the_programs_and_refuses_a_dataset_without_them(dataset, tmp_path):
    out, _ = dataset
    again = str(tmp_path / "again")
    run_job(RederiveKind(), out, RederiveConfig(), again, workers=2)
    assert read(again, "go_programs").sort("program_id").equals(read(out, "go_programs").sort("program_id"))
    old = tmp_path / "old"
    shutil.copytree(out, old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["tables"]["go_runs"]["schema_version"] = 2
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="go_runs version 2.*re-run trace-go"):
        RederiveKind().units(str(old), RederiveConfig())


def test_sequential_distributions_in_the_dataset_have_zero_entropy(dataset):
    out, _ = dataset
    rows = read(out, "go_next_event").filter(pl.col("program_id") == "sequential")
    assert rows.height > 0 and rows["entropy"].max() == 0.0


def test_a_rerun_resumes_and_another_config_is_refused(dataset, programs):
    out, manifest = dataset
    again = run_job(GoKind(), str(programs), GoConfig(go=SETTINGS), out, workers=2)
    assert again["tables"] == manifest["tables"]
    with pytest.raises(ValueError, match="another config"):
        run_job(GoKind(), str(programs), GoConfig(go=replace(SETTINGS, runs=4)), out, workers=2)


def test_config_hash_covers_go_settings_but_not_cache_location():
    base = GoConfig(go=SETTINGS)
    assert GoConfig(go=GoSettings(runs=3, timeout_s=1.0, cache_dir="/x")).hash() == base.hash()
    assert GoConfig(go=replace(SETTINGS, warm_imports=("fmt",))).hash() == base.hash()
    assert GoConfig(go=GoSettings(runs=3, timeout_s=2.0)).hash() != base.hash()
    assert GoConfig(go=replace(SETTINGS, trajectory_window=8)).hash() != base.hash()
    assert base.as_dict()["go"]["timeout_s"] == 1.0
    assert "cache_dir" not in base.as_dict()["go"] and "warm_imports" not in base.as_dict()["go"]


def test_an_empty_programs_dir_is_refused(tmp_path, ray_local):
    with pytest.raises(ValueError, match="no subdirectory"):
        run_job(GoKind(), str(tmp_path), GoConfig(), str(tmp_path / "out"))
