"""The repository-tracing kind: a TOML manifest → one unit (one Ray task) per `[[repo]]`, or per piece of a suite
larger than `tests_per_unit` tests.

Each unit clones (or fetches) its repository into the machine's git cache, resolves the ref to a
commit SHA, installs, traces and cuts (`pipeline.stages.repos.trace`), then samples trajectories from
the new traces. Refs are resolved *inside* the task, on the machine that checks the commit out: the
driver needs no network or disk for repositories, and a clone or ref failure is that unit's failures
row like any other. The commit is recorded in every row; a re-run resumes by unit (manifest position).
Only where a suite may be split does planning check a repository out first, in a Ray task (`plan_repo`): the
pieces are cut from its test modules (pipeline/stages/repos/pieces.py) and pinned to the commit they were cut
from.

An `sdist = "name==version"` unit fetches the package index's source distribution instead
(`pipeline.sources.sdist`), into the same machine's cache. The git cache, the sdist cache and the pip
download cache live under `cache_dir` (default `$TRACEGEN_CACHE`, else
`~/.cache/tracegen`), shared by the tasks of one machine; per-run venvs and scratch dirs go under
`work_dir` (default: the system temp dir) and are deleted after each repository. Neither is hashed:
they say where the work happens, not what it computes.
"""

import functools
import os
import shutil
from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.engine.config import Option, setting
from pipeline.engine.errors import SetupError
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.orchestrate import map_tasks
from pipeline.engine.stats import StageOutput
from pipeline.kinds.options import PythonConfig, check_tracer_backend
from pipeline.sandbox import check_sandbox, make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repo_manifest import RepoSpec, read_repo_manifest
from pipeline.sources.sdist.cache import SdistCache
from pipeline.stages.decontaminate import Decontaminator, TraceCleaner
from pipeline.stages.repos.pieces import repo_pieces
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.repos.trace import trace_repo
from pipeline.stages.trajectories import SamplingSettings, TrajectorySampler


def default_cache_dir() -> str:
    return os.environ.get("TRACEGEN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tracegen")


@dataclass(frozen=True)
class ReposConfig(PythonConfig):
    """What a repository-tracing job computes (the sandbox and the Python its venvs are made from, entry budgets
    and tracer backend, sampling, the benchmark files traces are cleaned against) and where its caches live
    (`cache_dir`, `work_dir`, `pip_cache_dir`: not hashed; '' = the defaults above)."""

    kind: ClassVar[str] = "repos"
    tables: ClassVar[tuple[str, ...]] = ("traces", "trajectories", "repo_runs", "contaminated", "failures")
    trace: RepoTraceSettings = field(default_factory=RepoTraceSettings)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    tests_per_unit: int = setting(
        2000,
        Option(
            "--tests-per-unit",
            "split a repository's suite of more tests than this into units of about this many, by test module; "
            "0: one unit per repository",
        ),
    )
    decontaminate: Decontaminator = setting(default_factory=Decontaminator, hashed="when_set")
    cache_dir: str = setting(
        "",
        Option(
            "--cache-dir",
            "git mirrors, sdists and pip downloads",
            default_text="$TRACEGEN_CACHE or ~/.cache/tracegen",
        ),
        hashed=False,
    )
    work_dir: str = setting("", hashed=False)
    pip_cache_dir: str = setting("", hashed=False)

    def __post_init__(self):
        super().__post_init__()
        if type(self.tests_per_unit) is not int or self.tests_per_unit < 0:
            raise ValueError(f"--tests-per-unit must be an int >= 0 (0: never split), got {self.tests_per_unit!r}")

    @property
    def seed(self) -> int:
        return self.sampling.seed

    def caches(self) -> tuple[str, str]:
        """(the git and pip cache root, pip's download cache), absolute."""
        root = os.path.abspath(self.cache_dir or default_cache_dir())
        return root, self.pip_cache_dir or os.path.join(root, "pip")


def plan_repo(spec: RepoSpec, config: ReposConfig) -> list[RepoSpec]:
    """(A planning task, on the machine whose cache the unit will likely use.) The repository's pieces
    (pipeline/stages/repos/pieces.py), or [spec] when it stays one unit or cannot be checked out (its unit then
    records why, as any unit does)."""
    if spec.test or not config.tests_per_unit:
        return [spec]
    root, _ = config.caches()
    try:
        if spec.sdist:
            checkout = SdistCache(os.path.join(root, "sdist")).checkout(spec.sdist)
        else:
            checkout = GitCache(os.path.join(root, "git")).checkout(spec.url, spec.ref)
        return repo_pieces(spec, checkout.path, checkout.commit, config.tests_per_unit)
    except Exception:  # whatever the repository is, it never stops the plan: its unit meets it and reports it
        return [spec]


def plan_repos(specs: list[RepoSpec], config: ReposConfig) -> list[list[RepoSpec]]:
    """Each repository's pieces, in manifest order: planning tasks for those that may split."""
    if not config.tests_per_unit:
        return [[spec] for spec in specs]
    return map_tasks(functools.partial(plan_repo, config=config), specs)


def piece_suffix(spec: RepoSpec) -> str:
    """What a piece adds to its repository's unit id: `-2of5`; nothing for a whole repository."""
    return f"-{spec.piece.replace('/', 'of')}" if spec.piece else ""


def repo_units(plans: list[list[RepoSpec]]) -> list[Unit]:
    """One unit per repository, or per piece of a split one, in manifest order."""
    units = []
    for position, pieces in enumerate(plans):
        for spec in pieces:
            unit_id = f"repo-{position:05d}-{spec.name}{piece_suffix(spec)}"
            units.append(Unit(len(units), unit_id, spec, fingerprint(repr(spec))))
    return units


class ReposKind(JobKind[ReposConfig]):
    command = "trace-repos"
    help = "trace repositories' test suites (TOML manifest)"
    config_type = ReposConfig
    source = Option("--manifest", "TOML file of [[repo]] tables")
    throughput = Throughput("trace", "events", "events")
    task_memory_mb = 4096
    smaller_units = "a lower --tests-per-unit, or a lower --max-events"

    def preflight(self, config: ReposConfig) -> None:
        check_sandbox(config.sandbox, config.python)
        check_tracer_backend(config.sandbox, config.python, config.trace.tracer_backend)
        if shutil.which("git") is None:
            raise SetupError("trace-repos needs git to clone repositories: install it (apt-get install git)")
        root, _ = config.caches()
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as error:
            raise ValueError(f"--cache-dir {root!r} cannot be created ({error}); choose another") from error

    def units(self, source: str, config: ReposConfig) -> list[Unit]:
        """A bad manifest is a ValueError before anything runs, naming the file, line and key. A suite larger
        than `tests_per_unit` is planned as several units (`plan_repo`)."""
        return repo_units(plan_repos(read_repo_manifest(source), config))

    def produce(self, payload: RepoSpec, unit_id: str, config: ReposConfig, sink: UnitSink) -> StageOutput:
        """Trace one repository, sampling trajectories from each batch of traces as it is cut; both are written
        batch by batch. A trace whose entry function's code matches a benchmark item (`--decontaminate`) is
        dropped before its trajectories are sampled, and is a `contaminated` row. What the repository does wrong
        is a failures row; what is wrong with this machine (no sandbox, an unwritable cache) raises, so the unit
        stays unfinished and a re-run retries it."""
        root, pip_cache = config.caches()
        sampler = TrajectorySampler(config.sampling, unit_id)
        cleaner = TraceCleaner(config.decontaminate, unit_id)

        def emit(traces: list[dict]) -> None:
            traces = cleaner.drop(traces, cleaner.matches(traces), "traces", "trace_id")
            sink.write("traces", traces)
            sink.write("trajectories", sampler.sample(traces))

        traced = trace_repo(
            payload,
            make_sandbox(config.sandbox, python=config.python),
            GitCache(os.path.join(root, "git")),
            config.trace,
            unit_id,
            work_root=config.work_dir or None,
            pip_cache=pip_cache,
            sdists=SdistCache(os.path.join(root, "sdist")),
            emit=emit,
        )
        return traced + sampler.output() + cleaner.output()
