"""The repository-tracing job: a TOML manifest → one unit (one Ray task) per `[[repo]]`.

Each unit clones (or fetches) its repository into the machine's git cache, resolves the ref to a
commit SHA, installs, traces and cuts (`pipeline.stages.trace_repos`), then samples trajectories from
the new traces. Refs are resolved *inside* the task, on the machine that checks the commit out: the
driver needs no network or disk for repositories, and a clone or ref failure is that unit's failures
row like any other. The commit is recorded in every row; a re-run resumes by unit (manifest position).

The git cache and the pip download cache live under `cache_dir` (default `$TRACEGEN_CACHE`, else
`~/.cache/tracegen`), shared by the tasks of one machine; per-run venvs and scratch dirs go under
`work_dir` (default: the system temp dir) and are deleted after each repository.
"""

import functools
import os

from pipeline.config import JobConfig
from pipeline.executor import Unit, fingerprint
from pipeline.git_cache import GitCache
from pipeline.job import run_job
from pipeline.sandbox import make_sandbox
from pipeline.sources.repos import RepoSpec, read_repo_manifest
from pipeline.stages.trace_repos import RepoResult, trace_repo
from pipeline.stages.trajectories import sample_trajectories_stage


def default_cache_dir() -> str:
    return os.environ.get("TRACEGEN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tracegen")


def repo_units(specs: list[RepoSpec]) -> list[Unit]:
    """One unit per manifest entry, in manifest order."""
    return [Unit(index, f"repo-{index:05d}-{spec.name}", spec, fingerprint(repr(spec)))
            for index, spec in enumerate(specs)]


def run_repo(spec: RepoSpec, unit_id: str, config: JobConfig, cache_dir: str, work_dir: str | None = None,
             pip_cache_dir: str | None = None) -> RepoResult:
    """Trace one repository. What the repository does wrong is a failures row; what is wrong with this
    machine (no sandbox, an unwritable cache) raises, so the unit stays unfinished and a re-run retries it."""
    sandbox = make_sandbox(config.sandbox)
    cache = GitCache(os.path.join(cache_dir, "git"))
    return trace_repo(spec, sandbox, cache, config.trace, unit_id, work_root=work_dir,
                      pip_cache=pip_cache_dir or os.path.join(cache_dir, "pip"))


def produce_repo(spec: RepoSpec, unit_id: str, config: JobConfig, cache_dir: str, work_dir: str | None = None,
                 pip_cache_dir: str | None = None):
    """One unit: its rows per table (traces, trajectories, failures) and its stage counters."""
    result = run_repo(spec, unit_id, config, cache_dir, work_dir, pip_cache_dir)
    trajectories, sampling_failures, sampling = sample_trajectories_stage(
        result.traces, config.policy, config.seed, config.per_trace, unit_id)
    stats = {name: counter.as_dict() for name, counter in result.counters.items()}
    stats["trajectories"] = sampling.as_dict()
    return ({"traces": result.traces, "trajectories": trajectories,
             "failures": result.failures + sampling_failures}, stats)


def trace_repos_job(manifest: str, out: str, config: JobConfig, *, cache_dir: str | None = None,
                    work_dir: str | None = None, pip_cache_dir: str | None = None, workers: int | None = None,
                    address: str | None = None, overwrite: bool = False) -> dict:
    """Trace every repository of the manifest into the dataset at `out`; returns the manifest dict.

    A bad manifest is a ValueError before anything runs; everything a repository does wrong is a
    failures row of its own unit. `pip_cache_dir` (default `cache_dir/pip`) is pip's download cache,
    shared by the install steps.
    """
    specs = read_repo_manifest(manifest)
    cache_dir = os.path.abspath(cache_dir or default_cache_dir())
    os.makedirs(cache_dir, exist_ok=True)
    produce = functools.partial(produce_repo, config=config, cache_dir=cache_dir, work_dir=work_dir,
                                pip_cache_dir=pip_cache_dir)
    return run_job(repo_units(specs), produce, out, config, workers=workers, address=address,
                   overwrite=overwrite)
