"""Stage: run one Go program N times in the sandbox → `go_runs` rows, raw traces, failure rows.

One sandboxed command per program: `go_harness run` (built on the host, pipeline/stages/go/build.py) copies
the program, builds it once (offline: GOPROXY=off, the standard library plus modules already in the
module cache, GOTOOLCHAIN=local) and runs it `runs` times under runtime/trace with a per-run timeout,
printing one JSON line per run. Inside the sandbox: no network, read-only system directories, the
program directory read-only, and three private writable directories (the harness's scratch, a
hard-linked copy of the warm build cache, a temp/home dir); the module cache is bound read-only (a
writable one would let one program plant sources another program builds).

The harness's stdout is the only thing trusted, and it is checked strictly (pipeline/stages/go/
harness_output.py); trace files are opened only inside the scratch directory, without following
links. Malformed output is a failure row for the program, never an exception.

Outcomes: each run is a `go_runs` row (its status is data: ok, deadlock, timeout, panic, race,
exit_error). A program that does not compile gives one `go_runs` row with status build_error and
run_index -1 (the compiler's message in stderr_tail) *and* a `failures` row (stage build), so it is
counted among the failures too. A sandbox failure (the harness killed, e.g. past the wall clock) keeps
the runs that finished and adds a failure row; so does a harness error or missing runs. Every run's events
are checked against the scheduler's rules (pipeline/goscheduler/validity.py): a run that breaks one keeps its
row and adds an `InvalidEventSequence` failure row (the harness's parser is wrong).

The program itself is one `go_programs` row (its source text and content hash, pipeline/stages/go/
programs.py); every run row carries that hash. A program with its own timeout (a header comment or the
programs manifest, pipeline/sources/go_timeouts.py) runs with it in place of `GoSettings.timeout_s`.

Goroutine ids: the harness numbers goroutines per run; here they are renumbered per program from the
key paths (`canonical_ids`), so every run of a program uses the same id for the same goroutine.
"""

import argparse
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import zstandard

from pipeline.engine.config import Option, setting
from pipeline.engine.failures import Failure, Failures, Input
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.goscheduler.validity import RULES, first_violation
from pipeline.sandbox import Bind, Sandbox, SandboxLimits, SandboxResult
from pipeline.sandbox.files import open_sandbox_file
from pipeline.sources.go_programs import GoProgram
from pipeline.stages.go import build as go_build
from pipeline.stages.go import trajectories as go_trajectories
from pipeline.stages.go.harness_output import (
    HarnessOutputError,
    canonical_ids,
    parse_harness_output,
    renumber,
    renumber_leaked,
    run_gpaths,
)
from pipeline.stages.go.programs import program_row

BUILD_LIMIT_S = 300.0  # the harness's own limit on one build
PARSE_ALLOWANCE_S = 10.0  # per run, for the harness to read the trace
TRACE_ZSTD_LEVEL = 3
SYSTEM_DIRS = ("/usr/", "/etc/", "/opt/")


def gomaxprocs_list(given: str) -> tuple[int, ...]:
    """`--gomaxprocs 1,2,4` as the values."""
    try:
        return tuple(int(value) for value in given.split(",") if value.strip())
    except ValueError:
        raise ValueError(f"--gomaxprocs {given!r} is not a comma list of integers, e.g. 1,2,4") from None


@dataclass(frozen=True)
class GoSettings:
    """What a Go tracing job computes (hashed) and where its caches live (not hashed: cache_dir, warm_imports).

    runs: runs per program, each its own process. timeout_s: per-run timeout (a deadlocked or spinning
    run ends there). gomaxprocs: run i gets gomaxprocs[i % len]; empty leaves the runtime default.
    race: build with the race detector. test_regex: `-test.run` for test packages. max_events: event cap
    per run (`truncated` when hit). min_prefix_runs: exact-prefix rows need this many runs sharing the
    prefix. trajectory_window / trajectory_stride: go_trajectories windows of this many steps, one starting
    every stride steps (schemas/go_trajectories.py).
    rewrite: let the harness rewrite the programs' channel and sync operations so the runs' events
    name the objects and their states (go_harness/README.md; a program it cannot rewrite falls back to its
    original source, marked in go_runs.instrumentation). keep_traces / max_trace_bytes: store each raw
    trace (zstd) in go_traces when its raw size is at most this. memory_bytes / race_memory_bytes:
    RLIMIT_AS of every process in the sandbox (the Go runtime and the race detector reserve address space:
    measured, 1 GiB suffices for small programs even under -race; the race default is 4x to leave room for
    the detector's shadow memory). nproc:
    RLIMIT_NPROC of the sandbox user (threads count: the go command, compilers, GOMAXPROCS threads).
    file_bytes: RLIMIT_FSIZE (per file: binaries, traces). max_output_bytes: cap on the harness's
    stdout (JSON lines). warm_imports: standard packages precompiled into the shared warm build cache.
    cache_dir: harness binary, warm caches and scratch ('' = $TRACEGEN_GO_CACHE or ~/.cache/tracegen/go).
    """

    runs: int = setting(5, Option("--runs", "runs per Go program"))
    timeout_s: float = setting(
        5.0,
        Option(
            "--timeout",
            "seconds per run, for programs without their own: a `// tracegen: timeout=30s` header or an entry of "
            "PROGRAMS/tracegen.toml",
        ),
    )
    gomaxprocs: tuple[int, ...] = setting(
        (),
        Option(
            "--gomaxprocs",
            "comma list of GOMAXPROCS values, cycled over runs",
            parse=gomaxprocs_list,
            show=lambda values: ",".join(map(str, values)),
            default_text="the runtime's",
        ),
    )
    race: bool = setting(False, Option("--race", "build with the race detector", action="store_true"))
    test_regex: str = "^Test"
    max_events: int = setting(20_000, Option("--max-events", "event cap per run"))
    min_prefix_runs: int = 2
    trajectory_window: int = setting(go_trajectories.WINDOW, go_trajectories.WINDOW_OPTION)
    trajectory_stride: int = setting(go_trajectories.STRIDE, go_trajectories.STRIDE_OPTION)
    rewrite: bool = setting(
        True,
        Option(
            "--rewrite",
            "rewrite channel and sync operations so events name the objects and their states; a program that "
            "cannot be rewritten runs unmodified, marked 'fallback' in go_runs.instrumentation",
            action=argparse.BooleanOptionalAction,
        ),
    )
    keep_traces: bool = True
    max_trace_bytes: int = 64 << 20
    memory_bytes: int = 4 << 30
    race_memory_bytes: int = 16 << 30
    nproc: int = 512
    file_bytes: int = 1 << 30
    max_output_bytes: int = 256 << 20
    warm_imports: tuple[str, ...] = setting(go_build.WARM_IMPORTS, hashed=False)
    cache_dir: str = setting("", hashed=False)

    def __post_init__(self):
        object.__setattr__(self, "gomaxprocs", tuple(self.gomaxprocs))
        object.__setattr__(self, "warm_imports", tuple(self.warm_imports))
        for name in (
            "runs",
            "max_events",
            "min_prefix_runs",
            "trajectory_window",
            "trajectory_stride",
            "max_trace_bytes",
            "memory_bytes",
            "race_memory_bytes",
            "nproc",
            "file_bytes",
            "max_output_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"GoSettings.{name} must be >= 1, got {getattr(self, name)!r}")
        if not 0.01 <= self.timeout_s <= 3600:
            raise ValueError(f"GoSettings.timeout_s must be in 0.01..3600 seconds, got {self.timeout_s!r}")
        if any(type(n) is not int or n < 1 for n in self.gomaxprocs):
            raise ValueError(f"GoSettings.gomaxprocs must be positive integers, got {self.gomaxprocs!r}")
        try:
            re.compile(self.test_regex)
        except re.error as error:
            raise ValueError(f"GoSettings.test_regex {self.test_regex!r} is not a regexp: {error}") from error

    def limits(self) -> SandboxLimits:
        """Sandbox limits of one program: the build, then every run with its kill grace and parse time."""
        grace = max(2.0, self.timeout_s / 2)
        wall = BUILD_LIMIT_S + self.runs * (self.timeout_s + grace + PARSE_ALLOWANCE_S) + 30.0
        return SandboxLimits(
            wall_s=wall,
            memory_bytes=self.race_memory_bytes if self.race else self.memory_bytes,
            cpu_s=int(wall * 4),
            nproc=self.nproc,
            file_bytes=self.file_bytes,
            output_tail_bytes=self.max_output_bytes,
        )


@dataclass(frozen=True)
class GoTools:
    """The host-side pieces a worker needs, resolved once per process (`GoTools.resolve`)."""

    toolchain: go_build.Toolchain
    harness: str
    harness_version: str
    cache_root: str

    @classmethod
    def resolve(cls, settings: GoSettings) -> "GoTools":
        toolchain = go_build.find_toolchain()
        harness, version = go_build.ensure_harness(settings.cache_dir, toolchain)
        go_build.sweep_work(settings.cache_dir)
        return cls(toolchain, harness, version, str(go_build.cache_root(settings.cache_dir)))


@dataclass
class ProgramResult:
    """Everything one program produced, filled in as the harness's output is collected."""

    failures: Failures
    runs: list[dict] = field(default_factory=list)
    traces: list[dict] = field(default_factory=list)
    programs: list[dict] = field(default_factory=list)
    counters: StageCounters = field(default_factory=lambda: StageCounters("go_runs"))

    def output(self) -> StageOutput:
        return StageOutput(
            {
                "go_runs": self.runs,
                "go_traces": self.traces,
                "go_programs": self.programs,
                "failures": self.failures.rows,
            },
            {"go_runs": self.counters},
        )


TIMED_OUT_CODES = (124, -1)


def is_complete(run: dict) -> bool:
    """Whether the run's events are its whole story (see schemas/go_runs.py `complete`)."""
    if run["truncated"] or run["trace_error"] or not run["trace_file"] or run["status"] == "build_error":
        return False
    if run["generations"] < 1:  # a header and nothing else: the run's events are unknown, not absent
        return False
    if run["status"] == "deadlock":
        return True
    timed_out = run["exit_code"] in TIMED_OUT_CODES or "panic: test timed out after" in run["stderr_tail"]
    if timed_out or "fatal error:" in run["stderr_tail"]:
        return False
    if run["status"] in ("ok", "leak", "panic", "race"):
        return True
    # exit_error: a failing test still flushes its trace; os.Exit and fatal errors do not.
    return run["status"] == "exit_error" and run["mode"] == "test" and "--- FAIL" in run["stdout_tail"]


def program_settings(program: GoProgram, settings: GoSettings) -> GoSettings:
    """The settings `program` runs with: the job's, with the program's own timeout when it has one."""
    return settings if program.timeout_s is None else replace(settings, timeout_s=program.timeout_s)


def run_row(
    program: GoProgram,
    program_hash: str,
    run: dict,
    events: list[dict],
    goroutines: list[dict],
    leaked: list[dict],
    *,
    race: bool,
    trace_bytes: int | None,
    trace_stored: bool,
    tools: GoTools,
) -> dict:
    return {
        "program_id": program.program_id,
        "program_hash": program_hash,
        "run_index": run["run_index"],
        "status": run["status"],
        "mode": run["mode"],
        "race": race,
        "gomaxprocs": run["gomaxprocs"],
        "exit_code": run["exit_code"],
        "duration_ms": run["duration_ms"],
        "complete": is_complete(run),
        "truncated": run["truncated"],
        "trace_error": run["trace_error"] or None,
        "stderr_tail": run["stderr_tail"] or None,
        "stdout_tail": run["stdout_tail"] or None,
        "generations": run["generations"],
        "instrumentation": run["instrumentation"],
        "rewrite_error": run["rewrite_error"] or None,
        "leaked": leaked,
        "n_events": len(events),
        "events": events,
        "goroutines": goroutines,
        "trace_bytes": trace_bytes,
        "trace_stored": trace_stored,
        "go_version": tools.toolchain.version,
        "harness_version": tools.harness_version,
    }


def read_trace(path: str, limit: int) -> tuple[int | None, bytes | None]:
    """(size, bytes) of a trace the sandbox wrote; bytes None when over `limit`. Never follows a link
    and reads only a regular file: the sandboxed program could have replaced the trace with either."""
    handle = open_sandbox_file(path)
    if handle is None:
        return None, None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            return size, None
        data = handle.read(limit + 1)
    return (len(data), data) if len(data) <= limit else (len(data), None)


def trace_row(program: GoProgram, run_index: int, mode: str, data: bytes, max_events: int, version: str) -> dict:
    return {
        "program_id": program.program_id,
        "run_index": run_index,
        "mode": mode,
        "file_prefix": program.file_prefix,
        "max_events": max_events,
        "harness_version": version,
        "trace_bytes": len(data),
        "trace_sha256": hashlib.sha256(data).hexdigest(),
        "trace_zstd": zstandard.ZstdCompressor(level=TRACE_ZSTD_LEVEL).compress(data),
    }


# ---------------------------------------------------------------------------------------------------------
# The stage.


def trace_program(
    program: GoProgram, settings: GoSettings, sandbox: Sandbox, unit_id: str, tools: GoTools | None = None
) -> StageOutput:
    """Build and run one program in the sandbox: its `go_programs` row, its `go_runs`, `go_traces` and
    `failures` rows and the `go_runs` counters. `settings.timeout_s` gives way to the program's own."""
    result = ProgramResult(Failures(unit_id))
    about = Input(program.program_id, program.path, f"Go program {program.program_id!r}")
    result.counters.n_in = 1
    with result.counters.timed():
        tools = tools or GoTools.resolve(settings)
        settings = program_settings(program, settings)
        result.programs.append(program_row(program, settings.timeout_s))
        base = go_build.ensure_warm_cache(
            program.mode, settings.race, settings.warm_imports, settings.cache_dir, tools.toolchain
        )
        work_root = Path(tools.cache_root) / "work"
        work_root.mkdir(parents=True, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix="run-", dir=work_root)
        try:
            runs, failure = _run_harness(program, settings, sandbox, tools, base, scratch)
            if failure is not None:
                result.failures.add(about, failure, result.counters)
            _collect_runs(program, settings, tools, runs, os.path.join(scratch, "work"), result, about)
            for run in runs:
                if run["status"] == "build_error":
                    result.failures.add(about, _build_failure(run), result.counters)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    result.counters.n_out = len(result.runs)
    result.counters.events = sum(row["n_events"] for row in result.runs)
    return result.output()


def _run_harness(program, settings, sandbox, tools, base, scratch) -> tuple[list[dict], Failure | None]:
    """Run `go_harness run` in the sandbox: the runs it reported, and what went wrong with it as a whole."""
    work, gocache, tmp = (os.path.join(scratch, name) for name in ("work", "gocache", "tmp"))
    os.mkdir(work)
    os.mkdir(tmp)
    os.chmod(tmp, 0o777)
    go_build.link_cache(base, gocache)
    os.makedirs(tools.toolchain.modcache, exist_ok=True)
    limits = settings.limits()
    outcome = sandbox.run(
        _harness_argv(program, settings, tools, work),
        binds=_harness_binds(program, tools, work, gocache, tmp),
        env=go_build.go_env(tools.toolchain, gocache, tmp),
        cwd=work,
        limits=limits,
    )
    stderr = outcome.stderr_tail.decode("utf-8", "replace") or None
    if len(outcome.stdout_tail) >= limits.output_tail_bytes:
        return [], Failure(
            "parse",
            "HarnessOutputTooLarge",
            f"the harness printed more than {limits.output_tail_bytes} "
            f"bytes; lower max_events or runs, or raise max_output_bytes",
            stderr,
        )
    finished = outcome.cause is None and outcome.returncode == 0
    try:
        runs = parse_harness_output(outcome.stdout_tail, work=work, max_events=settings.max_events, finished=finished)
    except HarnessOutputError as error:
        return [], Failure(
            "parse",
            "BadHarnessOutput",
            f"the harness's output is malformed ({error}); the program "
            f"may have interfered with the harness, or go_harness and this pipeline disagree",
            stderr,
        )
    return runs, _harness_failure(outcome, runs, settings, stderr)


def _harness_argv(program: GoProgram, settings: GoSettings, tools: GoTools, work: str) -> list[str]:
    """`go_harness run` for `program` with the job's runs, timeout, event cap, mode and scheduling options."""
    argv = [
        tools.harness,
        "run",
        "-dir",
        os.path.realpath(program.path),
        "-work",
        work,
        "-runs",
        str(settings.runs),
        "-timeout",
        f"{max(1, round(settings.timeout_s * 1000))}ms",
        "-max-events",
        str(settings.max_events),
        "-mode",
        program.mode,
        "-test",
        settings.test_regex,
        "-keep-traces=true",
        f"-rewrite={'true' if settings.rewrite else 'false'}",
    ]
    if settings.race:
        argv.append("-race")
    if settings.gomaxprocs:
        argv += ["-gomaxprocs", ",".join(map(str, settings.gomaxprocs))]
    return argv


def _harness_binds(program: GoProgram, tools: GoTools, work: str, gocache: str, tmp: str) -> list[Bind]:
    """The harness, the program and the module cache read-only; its scratch, build cache and temp writable; the
    toolchain too when it lives outside the system directories."""
    binds = [
        Bind(os.path.dirname(tools.harness)),
        Bind(os.path.realpath(program.path)),
        Bind(tools.toolchain.modcache),
        Bind(work, True),
        Bind(gocache, True),
        Bind(tmp, True),
    ]
    if not (tools.toolchain.goroot + "/").startswith(SYSTEM_DIRS):
        binds.append(Bind(tools.toolchain.goroot))
    return binds


def _harness_failure(
    outcome: SandboxResult, runs: list[dict], settings: GoSettings, stderr: str | None
) -> Failure | None:
    """What went wrong with a harness run whose output parsed: the sandbox ended it, it exited with an error,
    or it reported fewer runs than asked (a build error is one run, and its own failure)."""
    if outcome.cause is not None:
        return Failure(
            "sandbox",
            "SandboxFailed",
            f"the sandbox ended the harness after {len(runs)} of {settings.runs} "
            f"runs ({outcome.describe()}); the finished runs are kept",
            stderr,
        )
    if outcome.returncode != 0:
        return Failure(
            "sandbox",
            "HarnessError",
            f"go_harness exited with status {outcome.returncode} "
            f"({outcome.describe()}); fix the program directory or the harness",
            stderr,
        )
    if runs and runs[0]["status"] != "build_error" and len(runs) != settings.runs:
        return Failure("sandbox", "MissingRuns", f"the harness reported {len(runs)} of {settings.runs} runs", stderr)
    return None


def _collect_runs(
    program: GoProgram,
    settings: GoSettings,
    tools: GoTools,
    runs: list[dict],
    work: str,
    result: ProgramResult,
    about: Input,
) -> None:
    """Each run's `go_runs` row (goroutines renumbered per program) and, when kept, its `go_traces` row; a run
    whose events break a scheduler rule (`sequence_failure`) also gets a failure row."""
    ids = canonical_ids(gpath for run in runs for gpath in run_gpaths(run))
    for run in runs:
        events, goroutines = renumber(run["events"], run["goroutines"], ids)
        leaked = renumber_leaked(run["leaked"], ids)
        size = data = None
        if run["trace_file"]:
            size, data = read_trace(os.path.join(work, f"run-{run['run_index']}.trace"), settings.max_trace_bytes)
        kept = data if settings.keep_traces else None
        stored = kept is not None
        row = run_row(
            program,
            result.programs[0]["program_hash"],
            run,
            events,
            goroutines,
            leaked,
            race=settings.race,
            trace_bytes=size,
            trace_stored=stored,
            tools=tools,
        )
        result.runs.append(row)
        invalid = sequence_failure(row)
        if invalid is not None:
            result.failures.add(about, invalid)
        if kept is not None:
            result.traces.append(
                trace_row(program, run["run_index"], run["mode"], kept, settings.max_events, tools.harness_version)
            )


def _build_failure(run: dict) -> Failure:
    """The failure of a program that did not build: not a program at all (the harness's own verdict), or the
    compiler's error."""
    message = " | ".join((run["stderr_tail"].strip().splitlines() or ["(no output)"])[-3:])[:500]
    if run["stderr_tail"].startswith("tracegen: "):  # the harness's own verdict, e.g. no main package
        return Failure(
            "build",
            "NotAGoProgram",
            f"is not a runnable program ({message}); it needs a main package "
            f"or a _test.go file with func TestX(t *testing.T)",
            run["stderr_tail"],
        )
    return Failure(
        "build",
        "BuildError",
        f"does not compile: {message}; fix the program (its go_runs row, "
        f"status build_error, holds the compiler's full message)",
        run["stderr_tail"],
    )


def sequence_failure(run: dict) -> Failure | None:
    """The failure of a go_runs row whose events break a rule (None when they are valid): the row is still
    written, but the parser that made it is wrong."""
    violation = first_violation(run["events"], run["gomaxprocs"])
    if violation is None:
        return None
    return Failure(
        "parse",
        "InvalidEventSequence",
        f"run {run['run_index']}: event {violation.index} breaks the scheduler rule {violation.rule!r} "
        f"({RULES[violation.rule]}): {violation.message}; the harness's parser is wrong, report it with the "
        f"run's stored trace (the go_runs row is kept)",
    )
