"""A kind's config hash covers that kind's settings only: changing another kind's defaults never makes a
finished dataset "another config" (what incremental refreshes rely on)."""

import hashlib
import json
import shutil

import pytest
from go_helpers import EXAMPLES, requires_bwrap, requires_go

from pipeline.debugger.policy import PolicyConfig
from pipeline.engine.config import SCHEMAS_HASHED_FROM, settings_dict
from pipeline.engine.job import run_job
from pipeline.kinds import KINDS
from pipeline.kinds.functions import FunctionsConfig
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.kinds.repos import ReposConfig
from pipeline.kinds.resample import ResampleConfig
from pipeline.stages.code_tokens import NORMALISATION
from pipeline.stages.dedup import DedupSettings
from pipeline.stages.go.runs import GoSettings
from pipeline.stages.trace_functions import ReprLimits, TraceSettings
from pipeline.stages.trajectories import SamplingSettings


def change_python_defaults(monkeypatch) -> None:
    """Every default of the Python tracing, sampling and dedup settings moved to another valid value."""
    monkeypatch.setattr(
        TraceSettings.__init__,
        "__defaults__",
        (20_000, 4 << 20, 2.0, 4.0, ReprLimits(100, 10, 3, "user"), True, "settrace"),
    )
    monkeypatch.setattr(SamplingSettings.__init__, "__defaults__", (7, 3, PolicyConfig(max_actions=16)))
    monkeypatch.setattr(DedupSettings.__init__, "__defaults__", (True, 64, 0.9, 3, 2, NORMALISATION))


def test_the_patch_really_changes_the_python_kinds(monkeypatch):
    before = {config().hash() for config in (FunctionsConfig, ReposConfig, ResampleConfig)}
    change_python_defaults(monkeypatch)
    after = {config().hash() for config in (FunctionsConfig, ReposConfig, ResampleConfig)}
    assert before.isdisjoint(after)


def test_each_kind_hashes_its_name_and_only_its_settings():
    go = settings_dict(GoConfig())
    assert set(go) == {"zstd_level", "sandbox", "go"} and "cache_dir" not in go["go"]
    assert len({type(kind).__name__ for kind in KINDS}) == len(KINDS)
    assert GoConfig(go=GoSettings(cache_dir="/elsewhere")).hash() == GoConfig().hash()
    assert GoConfig(go=GoSettings(runs=4)).hash() != GoConfig().hash()
    assert ReposConfig(cache_dir="/elsewhere", work_dir="/w").hash() == ReposConfig().hash()
    # Two kinds with equal settings still differ: the kind's name is hashed.
    assert ResampleConfig().as_dict() != FunctionsConfig().as_dict()


@requires_go
@requires_bwrap
def test_a_go_rerun_after_a_python_only_default_changed_is_the_same_config(tmp_path, monkeypatch, ray_local):
    programs = tmp_path / "programs"
    shutil.copytree(EXAMPLES / "sequential", programs / "sequential")
    out = str(tmp_path / "out")
    config = GoConfig(go=GoSettings(runs=2, timeout_s=2.0))
    first = run_job(GoKind(), str(programs), config, out, workers=2)
    change_python_defaults(monkeypatch)
    again = run_job(GoKind(), str(programs), GoConfig(go=GoSettings(runs=2, timeout_s=2.0)), out, workers=2)
    assert again["config_hash"] == first["config_hash"]
    assert again["tables"] == first["tables"]  # every unit was skipped as finished: the same shards
    with pytest.raises(ValueError, match="another config"):
        run_job(GoKind(), str(programs), GoConfig(go=GoSettings(runs=3, timeout_s=2.0)), out, workers=2)


def test_a_schema_bump_makes_another_config_of_the_kinds_that_write_the_table_only(monkeypatch):
    from schemas import TABLES

    for config in (FunctionsConfig, GoConfig, ReposConfig, ResampleConfig):
        assert config.tables and set(config.tables) <= set(TABLES) <= set(SCHEMAS_HASHED_FROM)
    before = {config: config().hash() for config in (FunctionsConfig, GoConfig, ReposConfig, ResampleConfig)}
    monkeypatch.setattr(TABLES["trajectories"], "VERSION", TABLES["trajectories"].VERSION + 1)
    after = {config: config().hash() for config in before}
    changed = {config.__name__ for config in before if before[config] != after[config]}
    assert changed == {"FunctionsConfig", "ReposConfig", "ResampleConfig"}  # GoConfig writes no trajectories


def test_repo_runs_version_3_is_another_config_of_trace_repos_and_no_other_kind():
    assert SCHEMAS_HASHED_FROM["repo_runs"] == 2
    content = {"kind": "repos", **ReposConfig().as_dict()}
    plain = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    assert ReposConfig().hash() != plain  # a trace-repos dataset of repo_runs 2 is re-run, never mixed
    # A kind that writes neither repo_runs nor a bumped table keeps its hash (trace-functions writes `contaminated`,
    # at VERSION 2 since issue 38, so it no longer does).
    content = {"kind": "go", **GoConfig().as_dict()}
    plain = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    assert GoConfig().hash() == plain  # a Go dataset keeps its hash
