"""The repository-tracing kind: a TOML manifest → one unit (one Ray task) per `[[repo]]`.

Each unit clones (or fetches) its repository into the machine's git cache, resolves the ref to a
commit SHA, installs, traces and cuts (`pipeline.stages.repos.trace`), then samples trajectories from
the new traces. Refs are resolved *inside* the task, on the machine that checks the commit out: the
driver needs no network or disk for repositories, and a clone or ref failure is that unit's failures
row like any other. The commit is recorded in every row; a re-run resumes by unit (manifest position).

An `sdist = "name==version"` unit fetches the package index's source distribution instead
(`pipeline.sources.sdist`), into the same machine's cache. The git cache, the sdist cache and the pip
download cache live under `cache_dir` (default `$TRACEGEN_CACHE`, else
`~/.cache/tracegen`), shared by the tasks of one machine; per-run venvs and scratch dirs go under
`work_dir` (default: the system temp dir) and are deleted after each repository. Neither is hashed:
they say where the work happens, not what it computes.
"""

import argparse
import os
import shutil
from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.engine.config import UNHASHED
from pipeline.engine.errors import SetupError
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.stats import StageOutput
from pipeline.kinds.options import (
    SandboxedConfig,
    add_interpreter_arguments,
    add_repr_mode_argument,
    add_sampling_arguments,
    add_sandbox_argument,
    check_tracer_backend,
    python_from,
    repr_limits_from,
    sampling_from,
)
from pipeline.sandbox import check_sandbox, make_sandbox
from pipeline.sources.git_cache import GitCache
from pipeline.sources.repos import RepoSpec, read_repo_manifest
from pipeline.sources.sdist import SdistCache
from pipeline.stages.repos.run import RepoTraceSettings
from pipeline.stages.repos.trace import trace_repo
from pipeline.stages.trajectories import SamplingSettings, TrajectorySampler


def default_cache_dir() -> str:
    return os.environ.get("TRACEGEN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tracegen")


@dataclass(frozen=True)
class ReposConfig(SandboxedConfig):
    """What a repository-tracing job computes (the sandbox and the Python its venvs are made from, `python`:
    a resolved path, None = the sandbox's own; entry budgets and tracer backend, sampling) and where its
    caches live (`cache_dir`, `work_dir`, `pip_cache_dir`: not hashed; '' = the defaults above)."""

    kind: ClassVar[str] = "repos"
    python: str | None = None
    trace: RepoTraceSettings = field(default_factory=RepoTraceSettings)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    cache_dir: str = field(default="", metadata=UNHASHED)
    work_dir: str = field(default="", metadata=UNHASHED)
    pip_cache_dir: str = field(default="", metadata=UNHASHED)

    @property
    def seed(self) -> int:
        return self.sampling.seed

    def caches(self) -> tuple[str, str]:
        """(the git and pip cache root, pip's download cache), absolute."""
        root = os.path.abspath(self.cache_dir or default_cache_dir())
        return root, self.pip_cache_dir or os.path.join(root, "pip")


def repo_units(specs: list[RepoSpec]) -> list[Unit]:
    """One unit per manifest entry, in manifest order."""
    return [
        Unit(index, f"repo-{index:05d}-{spec.name}", spec, fingerprint(repr(spec))) for index, spec in enumerate(specs)
    ]


class ReposKind(JobKind[ReposConfig]):
    command = "trace-repos"
    help = "trace repositories' test suites (TOML manifest)"
    throughput = Throughput("trace", "events", "events")
    task_memory_mb = 4096
    smaller_units = "a unit is one repository: a lower --max-events"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--manifest", required=True, help="TOML file of [[repo]] tables")
        add_sandbox_argument(parser)
        add_interpreter_arguments(parser)
        parser.add_argument(
            "--max-events", type=int, default=RepoTraceSettings.max_events, help="events per entry trace"
        )
        parser.add_argument(
            "--cache-dir",
            default="",
            help="git mirrors, sdists and pip downloads (default $TRACEGEN_CACHE or ~/.cache/tracegen)",
        )
        add_repr_mode_argument(parser)
        parser.add_argument(
            "--no-parity",
            action="store_true",
            help="skip the untraced run of each suite that checks the tracer did not change any test's outcome",
        )
        add_sampling_arguments(parser)

    def configure(self, args: argparse.Namespace) -> tuple[str, ReposConfig]:
        return args.manifest, ReposConfig(
            sandbox=args.sandbox,
            python=python_from(args),
            trace=RepoTraceSettings(
                max_events=args.max_events,
                reprs=repr_limits_from(args),
                parity=not args.no_parity,
                tracer_backend=args.tracer_backend,
            ),
            sampling=sampling_from(args),
            cache_dir=args.cache_dir,
        )

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
        """A bad manifest is a ValueError before anything runs, naming the file, line and key."""
        return repo_units(read_repo_manifest(source))

    def produce(self, payload: RepoSpec, unit_id: str, config: ReposConfig, sink: UnitSink) -> StageOutput:
        """Trace one repository, sampling trajectories from each batch of traces as it is cut; both are written
        batch by batch. What the repository does wrong is a failures row; what is wrong with this machine (no
        sandbox, an unwritable cache) raises, so the unit stays unfinished and a re-run retries it."""
        root, pip_cache = config.caches()
        sampler = TrajectorySampler(config.sampling, unit_id)

        def emit(traces: list[dict]) -> None:
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
        return traced + sampler.output()
