"""Run a repository's test suite under the tracer in the sandbox (loopback only) and parse its stream.

The suite runs against the tree the install built in, as its own CI would run it there: after the install,
`env/src` is kept once as `env/built`, and before every sandboxed run of the suite (the parity run, the
traced run, each restart) `env/src` is made anew from it and bound writable. pytest runs with its cwd and
`--rootdir` there and PYTHONPATH `env/src/src` (when there is one) then `env/src`; what a suite writes where
it stands (a config file beside its tests, `.benchmarks/`, `.hypothesis/`) lands in that run's copy alone,
never in the host's checkout, and no run sees an earlier one's writes. The venv, the tracers and the request
stay read-only. Loopback connections are allowed where the sandbox has a network namespace of its own
(`Sandbox.private_network`); every other connection is refused.
"""

import json
import operator
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from pipeline.engine.config import Option, setting
from pipeline.engine.stats import StageCounters
from pipeline.sandbox import Bind, Sandbox, SandboxLimits, SandboxResult
from pipeline.sandbox.files import open_sandbox_file
from pipeline.sandbox.tracers_mount import TRACERS_PARENT, tracers_bind
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.install import open_up
from pipeline.stages.repos.requests import base_env, write_request
from pipeline.stages.repos.stream import ParsedStream, parse_repo_stream
from pipeline.stages.trace_functions import TRACER_BACKEND, ReprLimits, check_tracer_backend_name

MAX_LOG_BYTES = 4 << 20

MAX_FORKS_PER_TEST = 64

MAX_OUTPUT_BYTES = 192 << 20

MAX_RESTARTS = 20  # runs of one suite after the first, each after a test that ended its run

MIN_ATTEMPT_S = 5.0  # a restart needs at least this much of timeout_s left

WATCHDOG_EXIT = 71  # tracers.guard.watchdog.WATCHDOG_EXIT: the runner ended the run after a test overran


@dataclass(frozen=True)
class RepoTraceSettings:
    """The job-wide budgets of one entry trace (a manifest entry may set its own), the repr caps and mode,
    whether the suite also runs untraced to check that the tracer changed no test's outcome, and the tracer
    backend (auto: sys.monitoring where the venv's Python has it, tracers/suite/entry_monitoring.py)."""

    max_events: int = setting(10_000, Option("--max-events", "events per entry trace"))
    max_bytes: int = 8 << 20
    reprs: ReprLimits = field(default_factory=ReprLimits)
    parity: bool = setting(
        True,
        Option(
            "--no-parity",
            "skip the untraced run of each suite that checks the tracer did not change any test's outcome",
            action="store_true",
            parse=operator.not_,
            show=operator.not_,
        ),
    )
    tracer_backend: str = setting("auto", TRACER_BACKEND)

    def __post_init__(self):
        check_tracer_backend_name(self.tracer_backend)
        if self.max_events < 1 or self.max_bytes < 1:
            raise ValueError(
                f"max_events and max_bytes must be positive, got {self.max_events!r} and {self.max_bytes!r}"
            )


def trace_request(
    spec: RepoSpec, tree: str, env_dir: str, scratch: str, settings: RepoTraceSettings, read_only=(), loopback=False
) -> dict:
    """The request `tracers.runners.repos trace` reads: `worktree` is the run's writable copy of the installed
    tree (`tree`), `read_only` the sandbox's read-only binds (the guard refuses writes there even under /tmp),
    `loopback` whether connections to the loopback addresses are allowed."""
    return {
        "worktree": tree,
        "scratch": scratch,
        "venv": os.path.join(env_dir, "venv"),
        "read_only": list(read_only),
        "loopback": loopback,
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
        "tracer_backend": settings.tracer_backend,
    }


def keep_built_tree(worktree: str, env_dir: str) -> str:
    """`env/built`: the tree the install built in (`env/src`), moved aside once; every run starts from a copy.

    The install ran untrusted code with `env/` writable: an `env/src` or `env/venv` that is a link, not a
    directory, is removed (the host would follow it where the sandbox would not)."""
    built = os.path.join(env_dir, "built")
    if not os.path.isdir(built):
        src = os.path.join(env_dir, "src")
        for path in (src, os.path.join(env_dir, "venv")):
            if os.path.lexists(path) and not stat.S_ISDIR(os.lstat(path).st_mode):
                os.unlink(path)
        if not os.path.isdir(src):
            copy_worktree(worktree, src)
        os.rename(src, built)
    return built


def copy_worktree(worktree: str, src: str) -> None:
    """The worktree without `.git` at `src`, when the install left no `env/src` (the installer always copies it
    there, but the install runs the repository's own code, which may remove it)."""
    shutil.copytree(worktree, src, symlinks=True, ignore=plain_files_only(".git"))


def fresh_tree(env_dir: str) -> str:
    """`env/src` made anew from `env/built`, writable by whichever uid the sandbox runs as: one run's tree."""
    src = os.path.join(env_dir, "src")
    remove_tree(src)
    shutil.copytree(os.path.join(env_dir, "built"), src, symlinks=True, ignore=plain_files_only())
    open_up(src)
    return src


def plain_files_only(*names: str):
    """A copytree `ignore`: `names`, and whatever is neither a file, a directory nor a link (a fifo a sandbox
    left would block the copy)."""

    def ignore(parent: str, entries: list[str]) -> set[str]:
        skipped = set(names) & set(entries)
        for entry in entries:
            try:
                mode = os.lstat(os.path.join(parent, entry)).st_mode
            except OSError:
                skipped.add(entry)
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                skipped.add(entry)
        return skipped

    return ignore


def remove_tree(path: str) -> None:
    """Remove what a sandboxed run left at `path`, directories it made unwritable included; links are not
    followed."""

    def unlock(function, target, _error):
        parent = os.path.dirname(target)
        if not os.path.islink(parent):
            os.chmod(parent, 0o700)
        function(target)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=unlock)


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
    parsed); `untraced` runs it the same way without the tracer (the parity run, the benchmark's baseline).

    A run that ends inside a test (its watchdog killed it, or the test killed its runner), or that stopped
    because its trace output filled the byte budget, is run again in a fresh sandbox without the tests
    already run, up to MAX_RESTARTS times: one test never costs the ones after it. A test that ended its
    run is in the stream's `interrupted` list. `timeout_s` is what the suite's tests may take in all
    runs together (`RunBudget`)."""
    with counter.timed():
        keep_built_tree(worktree, env_dir)
        stream = ParsedStream()
        budget = RunBudget(spec.timeout_s)
        for attempt in range(MAX_RESTARTS + 1):
            done = [test.nodeid for test in stream.tests] + [stopped["nodeid"] for stopped in stream.interrupted]
            part, log_tail, outcome = run_attempt(
                spec, env_dir, run_dir, sandbox, settings, on_test, untraced, done, budget.wall_s()
            )
            budget.spend(outcome.wall_s, (part.collected or {}).get("seconds", 0.0))
            stopped = interrupted(part, outcome)
            full = stopped is None and output_full(part)
            merge(stream, part)
            last = attempt == MAX_RESTARTS or budget.left_s() < MIN_ATTEMPT_S or not tests_left(stream, stopped)
            if (stopped is None and not full) or last:
                break
            if stopped is not None:
                stream.interrupted.append(stopped)
            stream.restarts += 1
        run_s = budget.elapsed_s()
        counter.n_in = len(stream.tests)
        counter.n_out = sum(test.outcome == "passed" for test in stream.tests)
        for test in stream.tests:
            if test.outcome != "passed":
                counter.drop(test.outcome or "unfinished")
        counter.events = sum(test.n_events for test in stream.tests)
    counter.seconds -= getattr(on_test, "seconds", 0.0)  # cutting is the cut stage's time
    return SuiteRun(stream, log_tail, outcome, run_s)


class RunBudget:
    """The wall clock of a suite's runs. `timeout_s` is charged with each run's time less its startup
    (interpreter and collection, up to the stream's `collected` object), which comes from an allowance of
    `timeout_s` for all runs together: a restart pays again for collecting the suite, and that is not the
    tests' time. A restart's wall clock is what is left plus a startup like the first run's (and
    MIN_ATTEMPT_S) while the allowance lasts, so all runs together end within about twice `timeout_s`."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.charged_s = 0.0
        self.allowance_s = timeout_s
        self.startup_s: float | None = None  # the first run's
        self.started = time.monotonic()

    def wall_s(self) -> float:
        if self.startup_s is None:
            return self.timeout_s
        return round(self.left_s() + min(self.startup_s + MIN_ATTEMPT_S, self.allowance_s), 1)

    def spend(self, wall_s: float, startup_s: float) -> None:
        startup_s = min(max(float(startup_s), 0.0), wall_s)
        if self.startup_s is None:
            self.startup_s = startup_s
        covered = min(startup_s, self.allowance_s)
        self.allowance_s -= covered
        self.charged_s += wall_s - covered

    def left_s(self) -> float:
        return self.timeout_s - self.charged_s

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


def run_attempt(spec, env_dir, run_dir, sandbox, settings, on_test, untraced, deselect, wall_s):
    """One sandboxed run of the suite without the `deselect` tests, within `wall_s`, in a fresh copy of the
    installed tree: (its parsed stream, log tail, outcome)."""
    scratch = os.path.join(run_dir, "scratch")
    remove_tree(scratch)
    os.makedirs(scratch)
    tree = fresh_tree(env_dir)
    venv = os.path.join(env_dir, "venv")
    read_only = [tracers_bind(), Bind(venv), Bind(os.path.join(run_dir, "control"))]
    binds = read_only + [Bind(tree, writable=True), Bind(scratch, writable=True)]
    request = trace_request(
        spec, tree, env_dir, scratch, settings, [bind.path for bind in read_only], sandbox.private_network
    )
    path = write_request(run_dir, "trace.json", dict(request, untraced=untraced, deselect=deselect, wall_s=wall_s))
    python_path = [TRACERS_PARENT] + [p for p in (os.path.join(tree, "src"),) if os.path.isdir(p)] + [tree]
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
        wall_s=wall_s,
        memory_bytes=sandbox.limits.memory_bytes,
        cpu_s=int(wall_s) + 1,
        nproc=sandbox.limits.nproc,
        file_bytes=MAX_OUTPUT_BYTES + (64 << 20),
        output_tail_bytes=sandbox.limits.output_tail_bytes,
    )
    outcome = sandbox.run(
        [os.path.join(venv, "bin", "python"), "-s", "-B", "-m", "tracers.runners.repos", "trace", path],
        binds=binds,
        env=env,
        cwd=scratch,
        limits=limits,
    )
    out_dir = os.path.join(scratch, "out")
    log_tail = read_tail(os.path.join(out_dir, "pytest.log"), 16 << 10)
    handle = open_sandbox_file(os.path.join(out_dir, "trace.jsonl"))
    if handle is None:
        return ParsedStream(), log_tail, outcome
    with handle:
        part = parse_repo_stream(handle, 10 << 20, on_test, max_bytes=MAX_OUTPUT_BYTES + (1 << 20))
    return part, log_tail, outcome


def interrupted(part: ParsedStream, outcome: SandboxResult) -> dict | None:
    """{"nodeid", "error_type", "cause"} when the run ended inside a test and the rest is worth a new run
    (not past the wall clock, not with a malformed stream); else None."""
    verdict = watchdog_verdict(outcome.stdout_tail) if outcome.returncode == WATCHDOG_EXIT else None
    running = part.tests[-1].nodeid if part.tests and part.tests[-1].outcome is None else None
    nodeid = running or (verdict or {}).get("nodeid")
    if part.error is not None or nodeid is None or (outcome.cause is not None and "wall-clock" in outcome.cause):
        return None
    if verdict is not None:
        cause = (
            f"ran past its budget of {verdict['budget_s']:g}s (test_timeout_s plus the abort grace) and the "
            f"watchdog inside pytest did not stop it (the suite may have disabled it); the runner's "
            f"watchdog ended the run"
        )
        return {"nodeid": nodeid, "error_type": "TestHung", "cause": cause}
    if part.end is not None and part.end.get("exitstatus") is None:
        return {"nodeid": nodeid, "error_type": "TestHung", "cause": str(part.end.get("reason"))[:500]}
    cause = f"the run ended while it was running ({outcome.describe()}): the test killed its runner or pytest"
    return {"nodeid": nodeid, "error_type": "RunInterrupted", "cause": cause}


def tests_left(stream: ParsedStream, stopped: dict | None) -> bool:
    """Whether the suite has collected tests that no run has reached (a run of none collects nothing: exit 5)."""
    count = (stream.collected or {}).get("count")
    reached = {test.nodeid for test in stream.tests} | {test["nodeid"] for test in stream.interrupted}
    return count is None or len(reached | ({stopped["nodeid"]} if stopped else set())) < count


def output_full(part: ParsedStream) -> bool:
    """Whether the run stopped early because its trace output filled the byte budget (tests are left)."""
    return part.error is None and part.end is not None and part.end.get("stopped") == "max_output_bytes"


def watchdog_verdict(stdout: bytes) -> dict | None:
    """The supervisor's verdict line (tracers/guard/watchdog.py), checked; None when there is none."""
    for line in reversed(stdout.splitlines()[-5:]):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(value, dict)
            and value.get("watchdog") == "timeout"
            and type(value.get("budget_s")) is float
            and isinstance(value.get("nodeid"), str)
            and len(value["nodeid"]) <= 1000
        ):
            return value
    return None


def merge(stream: ParsedStream, part: ParsedStream) -> None:
    """Add one run's stream to the suite's: tests and violations append, collection errors once each."""
    stream.header = stream.header or part.header
    stream.tests += part.tests
    stream.violations += part.violations
    seen = {(error.get("nodeid"), error.get("message")) for error in stream.collect_errors}
    stream.collect_errors += [e for e in part.collect_errors if (e.get("nodeid"), e.get("message")) not in seen]
    stream.collected = stream.collected or part.collected
    stream.end = part.end
    stream.error = stream.error or part.error


def read_tail(path: str, limit: int) -> str:
    handle = open_sandbox_file(path)
    if handle is None:
        return ""
    with handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - limit))
        return handle.read().decode("utf-8", "replace")
