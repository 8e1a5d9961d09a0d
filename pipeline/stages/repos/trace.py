"""Stage: trace one repository@commit's test suite and cut function-level `traces` rows out of it.

clone (GitPython cache; for `sdist = "name==version"` the package index's sdist, fetched, verified and unpacked
by `pipeline.sources.sdist`) → install (sandbox, no network but the package index through the host's index proxy: a
fresh venv in a writable dir, the tree it builds in at `env/src`) → parity (the suite once untraced, in the
same sandbox: each test's outcome) → trace (sandbox, loopback only: the venv read-only, a fresh writable copy
of the installed tree and a fresh scratch dir; `tracers.runners.repos trace` runs pytest with
`tracers.suite.pytest_plugin`) → cut (host: strict parse of the stream, one row per entry, identical traces stored
once, function source read from the host's checkout; a trace whose test ended otherwise untraced is
`perturbed`). Each run of the suite gets its own copy of the installed tree (pipeline/stages/repos/suite_run.py).

Rows: `source_kind="repo"`, `source_id = name@commit:path:qualname` (an sdist's commit is
`sdist-sha256-{hex}`, its `repo_url` the archive's URL), `test_id` = the pytest node id
of the test whose setup, call or teardown made the call, `code` = the entry function's source text
(decorators included, original indentation), `input` = the entry call's arguments rendered from the
call event's locals (`tracers.suite.repo_code.render_input`: positional-only values bare, other
parameters `name=repr`, then `*args` / `**kwargs`). Events are re-indexed from 0, frame ids
renumbered by first appearance (the entry frame is 0), depth relative to the entry, and the entry's
parent is null. A generator function's entry holds every activation of its frame in turn (its call, then
each resume, each up to its yield or its end; several root-level activations), each one's depth relative
to its own call. `trace_id` hashes path, qualname, code, input, exit and events, so the same call
traced by two tests is stored once (the first test's id is kept).

Everything else that happens is a failures row, and traces recorded before a problem are kept:
clone/fetch/ref/checkout errors (for an sdist: SdistNotFound, SdistRejected, SdistUnreachable), a failed
install, collection errors (e.g. a syntax error), failing tests (traced anyway), tests whose outcome the tracer
changed (timing failures apart), a test past its time budget, an output flood, writes outside the scratch
directory and the run's tree, network beyond loopback, a fork bomb, a run killed by the sandbox, malformed
tracer output.
"""

import os
import shutil
import tempfile
from collections.abc import Callable

from pipeline.engine.failures import Failure, Failures, Input
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.sandbox import Sandbox
from pipeline.sources.git_cache import Checkout, GitCache, GitCacheError
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.sources.sdist import SdistError
from pipeline.sources.sdist.cache import SdistCache
from pipeline.stages.repos.cut import EntryCutter
from pipeline.stages.repos.install import install_repo
from pipeline.stages.repos.parity import outcomes, report_parity
from pipeline.stages.repos.run_failures import report_run
from pipeline.stages.repos.suite_run import RepoTraceSettings, run_suite
from pipeline.stages.repos.summary import repo_run_row

STAGES = ("clone", "install", "parity", "trace", "cut")


def trace_repo(
    spec: RepoSpec,
    sandbox: Sandbox,
    cache: GitCache,
    settings: RepoTraceSettings,
    unit_id: str,
    work_root: str | None = None,
    pip_cache: str | None = None,
    sdists: SdistCache | None = None,
    emit: Callable[[list[dict]], None] | None = None,
) -> StageOutput:
    """Clone (or fetch the sdist: into `sdists`, default `sdist/` under the git cache's root), install, check
    parity, trace and cut one repository: its `traces` and `failures` rows, its `repo_runs` row and the
    counters of its stages. Never raises for what the repository does. With `emit`, `traces` rows are passed
    to it in batches as they are cut (`EntryCutter`) instead of returned."""
    counters = {stage: StageCounters(stage) for stage in STAGES}
    failures = Failures(unit_id)
    output = StageOutput({"traces": [], "failures": failures.rows, "repo_runs": []}, counters)
    summary: dict = dict(commit=None, how=None, traced=None, baseline=None, traced_tests=None)
    checkout = _clone(spec, cache, sdists, counters["clone"], failures)
    if checkout is not None:
        summary["commit"] = checkout.commit
        run_dir = tempfile.mkdtemp(prefix=f"tracegen-{spec.name}-", dir=work_root)
        try:
            traces = _trace(spec, checkout, run_dir, sandbox, settings, pip_cache, counters, failures, summary, emit)
            output.tables["traces"] = traces
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
    n_traces = counters["cut"].n_out
    output.tables["repo_runs"] = [repo_run_row(spec, unit_id, n_traces=n_traces, failures=failures.rows, **summary)]
    return output


def repo_input(spec: RepoSpec, commit: str | None = None) -> Input:
    """The repository as the input its failures are about: `name@commit` once the commit is known (before,
    `name@pin`), from its manifest entry."""
    return Input(f"{spec.name}@{commit or spec.pin}", spec.input_ref or spec.name, f"repository {spec.name!r}")


def _clone(spec, cache, sdists, counter: StageCounters, failures: Failures) -> Checkout | None:
    """The repository's checkout (its git commit, or its sdist unpacked); None, and its failure, when it could
    not be had."""
    counter.n_in = 1
    with counter.timed():
        try:
            if spec.sdist:
                checkout = (sdists or SdistCache(os.path.join(cache.root, "sdist"))).checkout(spec.sdist)
            else:
                checkout = cache.checkout(spec.url, spec.ref)
        except (GitCacheError, SdistError) as error:
            failures.add(repo_input(spec), Failure("clone", error.kind, str(error)), counter)
            return None
    counter.n_out = 1
    return checkout


def _trace(spec, checkout, run_dir, sandbox, settings, pip_cache, counters, failures, summary, emit) -> list[dict]:
    """Install, check parity, trace and cut: the `traces` rows not emitted; `summary` gathers what the
    repository's `repo_runs` row reports."""
    repo = repo_input(spec, checkout.commit)
    installed, install_failures = install_repo(spec, checkout.path, run_dir, sandbox, pip_cache, counters["install"])
    failures.extend(repo, install_failures)
    if installed is None:
        return []
    summary["how"] = installed.how
    baseline = None
    if settings.parity:
        untraced = StageCounters("untraced")
        baseline = outcomes(
            run_suite(
                spec, checkout.path, installed.env_dir, run_dir, sandbox, settings, untraced, untraced=True
            ).stream
        )
        counters["parity"].seconds += untraced.seconds
    cutter = EntryCutter(spec, checkout, settings, counters["cut"], baseline, emit=emit)
    run = run_suite(
        spec, checkout.path, installed.env_dir, run_dir, sandbox, settings, counters["trace"], on_test=cutter
    )
    failures.extend(repo, report_run(run.stream, run.log_tail, run.outcome, spec))
    if baseline is not None:
        failures.extend(repo, report_parity(baseline, run.stream, counters["parity"]))
    traces, dropped = cutter.finish()
    failures.extend(repo, dropped)
    summary.update(traced=run.stream, baseline=baseline, traced_tests=cutter.traced_tests)
    return traces
