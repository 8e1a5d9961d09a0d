"""The re-sampling kind: trajectories drawn again from a stored dataset's traces, without re-tracing."""

import shutil

import polars as pl
import pytest

from pipeline.cli import main
from pipeline.engine.job import run_job
from pipeline.kinds.resample import ResampleConfig, ResampleKind
from pipeline.stages.trajectories import SamplingSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_trajectories_resample_from_stored_traces_without_retracing(dataset, functions_config, tmp_path):
    out, manifest = dataset
    sampling = functions_config.sampling
    same = run_job(ResampleKind(), out, ResampleConfig(sampling=sampling), str(tmp_path / "same"))
    other_sampling = SamplingSettings(seed=sampling.seed + 1, per_trace=1)
    other = run_job(ResampleKind(), out, ResampleConfig(sampling=other_sampling), str(tmp_path / "other"))
    original = pl.read_parquet(f"{out}/trajectories/*.parquet").sort("trajectory_id")
    again = pl.read_parquet(f"{tmp_path}/same/trajectories/*.parquet").sort("trajectory_id")
    assert original.select("trajectory_id", "text").equals(again.select("trajectory_id", "text"))
    assert same["tables"]["traces"]["rows"] == 0
    assert same["kind"] == "resample" and same["seed"] == sampling.seed
    n_traces = manifest["tables"]["traces"]["rows"]
    assert other["tables"]["trajectories"]["rows"] == 2 * n_traces  # forward + inverse, one each
    fresh = set(pl.read_parquet(f"{tmp_path}/other/trajectories/*.parquet")["trajectory_id"])
    assert fresh.isdisjoint(set(original["trajectory_id"]))


def test_a_source_without_a_dataset_is_refused(tmp_path, ray_local):
    with pytest.raises(ValueError, match="holds no dataset"):
        run_job(ResampleKind(), str(tmp_path), ResampleConfig(), str(tmp_path / "out"))


def test_directions_forward_samples_the_forward_tree_only(dataset, tmp_path):
    out, manifest = dataset
    argv = ["trajectories", "--traces", out, "--out", str(tmp_path / "forward"), "--directions", "forward"]
    assert main([*argv, "--per-trace", "1"]) == 0
    rows = pl.read_parquet(f"{tmp_path}/forward/trajectories/*.parquet")
    assert set(rows["direction"]) == {"forward"} and len(rows) == manifest["tables"]["traces"]["rows"]
