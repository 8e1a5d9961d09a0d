"""Stage: trace one repository@commit's test suite and cut function-level `traces` rows out of it.

clone (GitPython cache; for `sdist = "name==version"` the package index's sdist, fetched, verified and unpacked
by `pipeline.sources.sdist`) → install (sandbox, no network but the package index through the host's index proxy: a
fresh venv in a writable dir, the tree it builds in at `env/src`) → parity (the suite once untraced, in the
same sandbox: each test's outcome) → trace (sandbox, loopback only: the venv read-only, a fresh writable copy
of the installed tree and a fresh scratch dir; `tracers.runners.repos trace` runs pytest with
`tracers.suite.pytest_plugin`) → cut (host: strict parse of the stream, one row per entry, identical traces stored
once, function source read from the host's checkout; a trace whose test ended otherwise untraced is
`perturbed`). Each run of the suite gets its own copy of the installed tree (pipeline/stages/repos/run.py).

Rows: `source_kind="repo"`, `source_id = name@commit:path:qualname` (an sdist's commit is
`sdist-sha256-{hex}`, its `repo_url` the archive's URL), `test_id` = the pytest node id
of the test whose setup, call or teardown made the call, `code` = the entry function's source text
(decorators included, original indentation), `input` = the entry call's arguments rendered from the
call event's locals (`tracers.suite.repo_code.render_input`: positional-only values bare, other
parameters `name=repr`, then `*args` / `**kwargs`). Events are re-indexed from 0, frame ids
renumbered by first appearance (the entry frame is 0), depth relative to the entry, and the entry's
parent is null. `trace_id` hashes path, qualname, code, input, exit and events, so the same call
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

from pipeline.engine.failures import failure_row
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.sandbox import Sandbox
from pipeline.sources.git_cache import GitCache, GitCacheError
from pipeline.sources.repos import RepoSpec
from pipeline.sources.sdist import SdistError
from pipeline.sources.sdist.cache import SdistCache
from pipeline.stages.repos.cut import EntryCutter
from pipeline.stages.repos.install import install_repo
from pipeline.stages.repos.parity import outcomes, report_parity
from pipeline.stages.repos.report import report_run
from pipeline.stages.repos.run import RepoTraceSettings, run_suite
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
    output = StageOutput({"traces": [], "failures": [], "repo_runs": []}, counters)
    fail = RepoFailures(spec, unit_id, output.tables["failures"])
    summary = dict(how=None, traced=None, baseline=None, traced_tests=None)
    _trace(spec, sandbox, cache, sdists, settings, work_root, pip_cache, counters, output, fail, summary, emit)
    output.tables["repo_runs"] = [
        repo_run_row(
            spec,
            unit_id,
            fail.commit,
            n_traces=counters["cut"].n_out,
            failures=output.tables["failures"],
            **summary,
        )
    ]
    return output


def _trace(spec, sandbox, cache, sdists, settings, work_root, pip_cache, counters, output, fail, summary, emit) -> None:
    """The stages in order; `summary` gathers what the repository's `repo_runs` row reports."""
    clone = counters["clone"]
    clone.n_in = 1
    with clone.timed():
        try:
            if spec.sdist:
                checkout = (sdists or SdistCache(os.path.join(cache.root, "sdist"))).checkout(spec.sdist)
            else:
                checkout = cache.checkout(spec.url, spec.ref)
        except (GitCacheError, SdistError) as error:
            clone.drop(error.kind)
            fail("clone", error.kind, f"repository {spec.name!r}: {error}")
            return
    clone.n_out = 1
    fail.commit = checkout.commit
    run_dir = tempfile.mkdtemp(prefix=f"tracegen-{spec.name}-", dir=work_root)
    try:
        installed = install_repo(spec, checkout.path, run_dir, sandbox, pip_cache, counters["install"], fail)
        if installed is None:
            return
        env_dir = installed.env_dir
        summary["how"] = installed.how
        baseline = None
        if settings.parity:
            untraced = StageCounters("untraced")
            baseline = outcomes(
                run_suite(spec, checkout.path, env_dir, run_dir, sandbox, settings, untraced, untraced=True).stream
            )
            counters["parity"].seconds += untraced.seconds
        cutter = EntryCutter(spec, checkout, settings, counters["cut"], baseline, emit=emit)
        run = run_suite(spec, checkout.path, env_dir, run_dir, sandbox, settings, counters["trace"], on_test=cutter)
        report_run(run.stream, run.log_tail, run.outcome, spec, counters["trace"], fail)
        if baseline is not None:
            report_parity(baseline, run.stream, spec, counters["parity"], fail)
        output.tables["traces"] = cutter.finish(fail)
        summary.update(traced=run.stream, baseline=baseline, traced_tests=cutter.traced_tests)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


class RepoFailures:
    """Appends failure rows naming the repository (and its commit once known) to `rows`."""

    def __init__(self, spec: RepoSpec, unit_id: str, rows: list[dict]):
        self.spec, self.unit_id, self.rows = spec, unit_id, rows
        self.commit: str | None = None

    def __call__(
        self, stage: str, error_type: str, message: str, stderr_tail: str | None = None, source_id: str | None = None
    ) -> None:
        source = source_id or f"{self.spec.name}@{self.commit or self.spec.pin}"
        self.rows.append(
            failure_row(
                self.unit_id, source, stage, error_type, message, self.spec.input_ref or self.spec.name, stderr_tail
            )
        )
