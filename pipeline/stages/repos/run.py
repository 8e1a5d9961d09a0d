"""Run a repository's test suite under the tracer in the sandbox (network off) and parse its stream."""

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from pipeline.engine.stats import StageCounters
from pipeline.sandbox import Bind, Sandbox, SandboxLimits, SandboxResult
from pipeline.sandbox.files import open_sandbox_file
from pipeline.sandbox.tracers import TRACERS_PARENT, tracers_bind
from pipeline.sources.repos import RepoSpec
from pipeline.stages.repos.requests import base_env, write_request
from pipeline.stages.repos.stream import ParsedStream, parse_repo_stream
from pipeline.stages.trace_functions import ReprLimits

MAX_LOG_BYTES = 4 << 20

MAX_FORKS_PER_TEST = 64

MAX_OUTPUT_BYTES = 192 << 20


@dataclass(frozen=True)
class RepoTraceSettings:
    """The job-wide budgets of one entry trace (a manifest entry may set its own), the repr caps and mode,
    and whether the suite also runs untraced to check that the tracer changed no test's outcome."""

    max_events: int = 10_000
    max_bytes: int = 8 << 20
    reprs: ReprLimits = field(default_factory=ReprLimits)
    parity: bool = True

    def __post_init__(self):
        if self.max_events < 1 or self.max_bytes < 1:
            raise ValueError(
                f"max_events and max_bytes must be positive, got {self.max_events!r} and {self.max_bytes!r}"
            )


def trace_request(spec: RepoSpec, worktree: str, env_dir: str, scratch: str, settings: RepoTraceSettings) -> dict:
    """The request `tracers.repo_runner trace` reads."""
    src = os.path.join(env_dir, "src")
    return {
        "worktree": worktree,
        "scratch": scratch,
        "venv": os.path.join(env_dir, "venv"),
        "extra_roots": [src] if os.path.isdir(src) else [],
        "include": list(spec.include),
        "exclude": list(spec.exclude),
        "test_args": list(spec.test),
        "test_timeout_s": spec.test_timeout_s,
        "max_log_bytes": MAX_LOG_BYTES,
        "max_forks_per_test": MAX_FORKS_PER_TEST,
        "budgets": {
            "max_events": spec.max_events or settings.max_events,
            "max_bytes": spec.max_bytes or settings.max_bytes,
            "max_entries_per_test": spec.max_entries_per_test,
            "max_entries_per_function": spec.max_entries_per_function,
            "max_output_bytes": MAX_OUTPUT_BYTES,
        },
        "limits": settings.reprs.request(),
    }


class SuiteRun(NamedTuple):
    """A finished run of the suite: the parsed stream, the end of pytest's log, how the sandbox ended, and
    the seconds the sandboxed run took (the benchmark compares it with the untraced run)."""

    stream: ParsedStream
    log_tail: str
    outcome: SandboxResult
    run_s: float


def run_suite(
    spec: RepoSpec,
    worktree: str,
    env_dir: str,
    run_dir: str,
    sandbox: Sandbox,
    settings: RepoTraceSettings,
    counter: StageCounters,
    on_test=None,
    untraced: bool = False,
) -> SuiteRun:
    """Run the suite in the trace sandbox and parse its stream (`on_test` gets each test as it is
    parsed); `untraced` runs it the same way without the tracer (the parity run, the benchmark's baseline)."""
    with counter.timed():
        scratch = os.path.join(run_dir, "scratch")
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        request = dict(trace_request(spec, worktree, env_dir, scratch, settings), untraced=untraced)
        path = write_request(run_dir, "trace.json", request)
        venv = os.path.join(env_dir, "venv")
        python_path = [TRACERS_PARENT] + [p for p in (os.path.join(worktree, "src"),) if os.path.isdir(p)] + [worktree]
        env = dict(
            base_env(),
            PYTHONPATH=os.pathsep.join(python_path),
            PYTHONHASHSEED="0",
            HOME=os.path.join(scratch, "home"),
            TMPDIR=os.path.join(scratch, "tmp"),
            VIRTUAL_ENV=venv,
            PATH=os.path.join(venv, "bin") + ":/usr/local/bin:/usr/bin:/bin",
        )
        limits = SandboxLimits(
            wall_s=spec.timeout_s,
            memory_bytes=sandbox.limits.memory_bytes,
            cpu_s=int(spec.timeout_s) + 1,
            nproc=sandbox.limits.nproc,
            file_bytes=MAX_OUTPUT_BYTES + (64 << 20),
            output_tail_bytes=sandbox.limits.output_tail_bytes,
        )
        binds = [
            tracers_bind(),
            Bind(worktree),
            Bind(env_dir),
            Bind(os.path.join(run_dir, "control")),
            Bind(scratch, writable=True),
        ]
        started = time.monotonic()
        outcome = sandbox.run(
            [os.path.join(venv, "bin", "python"), "-s", "-B", "-m", "tracers.repo_runner", "trace", path],
            binds=binds,
            env=env,
            cwd=scratch,
            network=False,
            limits=limits,
        )
        run_s = time.monotonic() - started
        out_dir = os.path.join(scratch, "out")
        log_tail = read_tail(os.path.join(out_dir, "pytest.log"), 16 << 10)
        handle = open_sandbox_file(os.path.join(out_dir, "trace.jsonl"))
        if handle is None:
            stream = ParsedStream()
        else:
            with handle:
                stream = parse_repo_stream(handle, 10 << 20, on_test, max_bytes=MAX_OUTPUT_BYTES + (1 << 20))
        counter.n_in = len(stream.tests)
        counter.n_out = sum(test.outcome == "passed" for test in stream.tests)
        for test in stream.tests:
            if test.outcome != "passed":
                counter.drop(test.outcome or "unfinished")
        counter.events = sum(test.n_events for test in stream.tests)
    counter.seconds -= getattr(on_test, "seconds", 0.0)  # cutting is the cut stage's time
    return SuiteRun(stream, log_tail, outcome, run_s)


def read_tail(path: str, limit: int) -> str:
    handle = open_sandbox_file(path)
    if handle is None:
        return ""
    with handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - limit))
        return handle.read().decode("utf-8", "replace")
