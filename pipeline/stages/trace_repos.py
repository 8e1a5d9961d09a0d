"""Stage: trace one repository@commit's test suite and cut function-level `traces` rows out of it.

clone (GitPython cache) → install (sandbox, network on: a fresh venv in a writable dir, worktree
read-only) → trace (sandbox, network off: worktree and venv read-only, a fresh writable scratch dir;
`tracers.repo_runner trace` runs pytest with `tracers.pytest_plugin`) → cut (host: strict parse of the
stream, one row per entry, identical traces stored once).

Rows: `source_kind="repo"`, `source_id = name@commit:path:qualname`, `test_id` = the pytest node id
of the test whose setup, call or teardown made the call, `code` = the entry function's source text
(decorators included, original indentation), `input` = the entry call's arguments rendered from the
call event's locals (`tracers.repo_code.render_input`: positional-only values bare, other
parameters `name=repr`, then `*args` / `**kwargs`). Events are re-indexed from 0, frame ids
renumbered by first appearance (the entry frame is 0), depth relative to the entry, and the entry's
parent is null. `trace_id` hashes path, qualname, code, input, exit and events, so the same call
traced by two tests is stored once (the first test's id is kept).

Everything else that happens is a failures row, and traces recorded before a problem are kept:
clone/fetch/ref/checkout errors, a failed install, collection errors (e.g. a syntax error), failing
tests (traced anyway), a test past its time budget, an output flood, writes outside the scratch
directory, network access, a fork bomb, a run killed by the sandbox, malformed tracer output.
"""

import hashlib
import inspect
import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field

import tracers
from pipeline.failures import failure_row
from pipeline.git_cache import GitCache, GitCacheError
from pipeline.sandbox import Bind, Sandbox, SandboxLimits
from pipeline.sandbox.files import open_sandbox_file, read_sandbox_file
from pipeline.sources.repos import RepoSpec
from pipeline.stages.trace_functions import TraceSettings
from pipeline.stats import StageCounters
from pipeline.stages.repo_stream import VIOLATIONS, ParsedStream, ParsedTest, parse_repo_stream
from pipeline.tracefile import TraceFormatError, require

TRACERS_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tracers.__file__)))
PYTEST_EXITS = {2: ("Interrupted", "the test run was interrupted"),
                3: ("PytestInternalError", "pytest hit an internal error"),
                4: ("PytestUsageError", "pytest could not start (usage error, bad option or conftest)"),
                5: ("NoTests", "pytest collected no tests")}
HUNG_EXIT = 70
MAX_LOG_BYTES = 4 << 20
MAX_FORKS_PER_TEST = 64
MAX_OUTPUT_BYTES = 192 << 20
PASS_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "HTTP_PROXY",
            "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@dataclass
class RepoResult:
    """What tracing one repository produced; `timings` feeds the benchmark."""

    traces: list[dict]
    failures: list[dict]
    counters: dict[str, StageCounters]
    commit: str | None = None
    timings: dict = field(default_factory=dict)


def cut_entry(events: list[dict], entry: dict) -> list[dict]:
    """The entry's events, re-indexed from 0, frames renumbered (entry = 0), depth relative to it."""
    span = events[entry["start"]:entry["start"] + entry["n"]]
    root, base = span[0]["frame_id"], span[0]["depth"]
    ids: dict[int, int] = {}
    out = []
    for index, event in enumerate(span):
        frame = event["frame_id"]
        if frame == root:
            parent = None
        else:
            parent = ids.get(event["parent_frame_id"])
            require(parent is not None and event["depth"] > base, f"event {index}: its caller is outside the entry")
        new_id = ids.setdefault(frame, len(ids))
        out.append({"index": index, "event": event["event"], "frame_id": new_id, "parent_frame_id": parent,
                    "depth": event["depth"] - base, "lineno": event["lineno"], "function": event["function"],
                    "source": event["source"], "locals": event["locals"], "arg": event["arg"]})
    return out


def repo_trace_id(path: str, qualname: str, code: str, input_: str, exit_: str, events: list[dict]) -> str:
    """Content hash of the function and what happened (not of the test, the repository or the commit).

    Events are dicts built by `cut_entry` in one fixed key order, so no key sorting is needed."""
    payload = json.dumps([path, qualname, code, input_, exit_, events], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


class SourceReader:
    """Function source text from the worktree, by (path, first line); cached."""

    def __init__(self, worktree: str):
        self.root = os.path.realpath(worktree)
        self._files: dict[str, list[str]] = {}
        self._blocks: dict[tuple[str, int], str] = {}

    def block(self, path: str, firstlineno: int) -> str:
        key = (path, firstlineno)
        if key not in self._blocks:
            lines = self._lines(path)
            text = ""
            if 0 < firstlineno <= len(lines):
                try:
                    text = "".join(inspect.getblock(lines[firstlineno - 1:]))
                except Exception:  # tokenize errors: fall back to the def line
                    text = lines[firstlineno - 1]
            self._blocks[key] = text
        return self._blocks[key]

    def _lines(self, path: str) -> list[str]:
        if path not in self._files:
            full = os.path.realpath(os.path.join(self.root, path))
            lines: list[str] = []
            if full.startswith(self.root + os.sep) and os.path.isfile(full):
                with open(full, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines(keepends=True)
            self._files[path] = lines
        return self._files[path]


# -- the stage ------------------------------------------------------------------------------------------------
def trace_repo(spec: RepoSpec, sandbox: Sandbox, cache: GitCache, settings: TraceSettings, unit_id: str,
               work_root: str | None = None, pip_cache: str | None = None) -> RepoResult:
    """Clone, install, trace and cut one repository; never raises for what the repository does."""
    counters = {stage: StageCounters(stage) for stage in ("clone", "install", "trace", "cut")}
    result = RepoResult([], [], counters)
    fail = _Failures(spec, unit_id, result)
    clone = counters["clone"]
    clone.n_in = 1
    with clone.timed():
        try:
            checkout = cache.checkout(spec.url, spec.ref)
        except GitCacheError as error:
            clone.drop(error.kind)
            fail("clone", error.kind, f"repository {spec.name!r}: {error}")
            return _done(result)
    clone.n_out = 1
    result.commit = checkout.commit
    fail.commit = checkout.commit
    run_dir = tempfile.mkdtemp(prefix=f"tracegen-{spec.name}-", dir=work_root)
    try:
        env_dir = _install(spec, checkout.path, run_dir, sandbox, pip_cache, counters["install"], fail)
        if env_dir is not None:
            cutter = EntryCutter(spec, checkout, settings, counters["cut"])
            stream, log_tail, sandbox_result = _trace(spec, checkout.path, env_dir, run_dir, sandbox, settings,
                                                      counters["trace"], result, on_test=cutter)
            _report(stream, log_tail, sandbox_result, spec, counters["trace"], fail)
            result.traces = cutter.finish(fail)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return _done(result)


def _done(result: RepoResult) -> RepoResult:
    result.timings.update({f"{name}_s": round(counter.seconds, 6) for name, counter in result.counters.items()})
    return result


class _Failures:
    """Appends failure rows naming the repository (and its commit once known)."""

    def __init__(self, spec: RepoSpec, unit_id: str, result: RepoResult):
        self.spec, self.unit_id, self.result = spec, unit_id, result
        self.commit = None

    def __call__(self, stage: str, error_type: str, message: str, stderr_tail: str | None = None,
                 source_id: str | None = None) -> None:
        source = source_id or f"{self.spec.name}@{self.commit or self.spec.ref}"
        self.result.failures.append(failure_row(self.unit_id, source, stage, error_type, message,
                                                self.spec.input_ref or self.spec.name, stderr_tail))


def _is_package(worktree: str) -> bool:
    return any(os.path.isfile(os.path.join(worktree, name)) for name in ("pyproject.toml", "setup.py", "setup.cfg"))


def _write_request(run_dir: str, name: str, request: dict) -> str:
    control = os.path.join(run_dir, "control")
    os.makedirs(control, mode=0o755, exist_ok=True)
    os.chmod(control, 0o755)
    path = os.path.join(control, name)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(request, handle)
    os.chmod(path, 0o644)
    return path


def _base_env() -> dict[str, str]:
    env = {"PYTHONPATH": TRACERS_PARENT, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    env.update({key: os.environ[key] for key in PASS_ENV if key in os.environ})
    return env


def _open_up(path: str) -> None:
    """Let whichever uid the next sandbox runs as write `path` (a shared cache, a copy to build in)."""
    os.chmod(path, 0o777)
    for parent, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                full = os.path.join(parent, name)
                mode = os.lstat(full).st_mode
                if not stat.S_ISLNK(mode):
                    os.chmod(full, mode | 0o666 | (0o111 if stat.S_ISDIR(mode) else 0))
            except OSError:
                pass


def _install(spec, worktree, run_dir, sandbox, pip_cache, counter, fail) -> str | None:
    counter.n_in = 1
    with counter.timed():
        env_dir = os.path.join(run_dir, "env")
        os.makedirs(env_dir)
        src = None
        if spec.install is not None or _is_package(worktree):
            src = os.path.join(env_dir, "src")  # builds write into the source tree: give them a copy
            shutil.copytree(worktree, src, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            _open_up(src)
        request = {"venv": os.path.join(env_dir, "venv"), "src": src or worktree,
                   "commands": list(spec.install) if spec.install is not None else None,
                   "pip_cache": pip_cache, "result": os.path.join(env_dir, "install.json")}
        binds = [Bind(TRACERS_PARENT + "/tracers"), Bind(worktree), Bind(os.path.join(run_dir, "control")),
                 Bind(env_dir, writable=True)]
        if pip_cache:
            os.makedirs(pip_cache, exist_ok=True)
            binds.append(Bind(pip_cache, writable=True))
        path = _write_request(run_dir, "install.json", request)
        limits = SandboxLimits(wall_s=spec.install_timeout_s, memory_bytes=max(sandbox.limits.memory_bytes, 4 << 30),
                               cpu_s=int(spec.install_timeout_s) + 1, nproc=max(sandbox.limits.nproc, 256),
                               file_bytes=max(sandbox.limits.file_bytes, 2 << 30))
        outcome = sandbox.run([sandbox.python, "-s", "-B", "-m", "tracers.repo_runner", "install", path],
                              binds=binds, env=_base_env(), cwd=request["src"], network=True, limits=limits)
        if pip_cache:
            _open_up(pip_cache)
        report = _read_json(request["result"], 1 << 20)
    if report is not None and report.get("ok") is True:
        counter.n_out = 1
        return env_dir
    stderr = outcome.stderr_tail.decode("utf-8", "replace") or None
    if outcome.cause is not None and "wall-clock" in outcome.cause:
        counter.drop("InstallTimeout")
        fail("install", "InstallTimeout", f"repository {spec.name!r}: the install ran past install_timeout_s="
                                          f"{spec.install_timeout_s:g}; raise it in the manifest or slim `install`",
             stderr)
        return None
    step = _failed_step(report)
    if step is None:
        counter.drop("InstallFailed")
        fail("install", "InstallFailed", f"repository {spec.name!r}: the install sandbox failed "
                                         f"({outcome.describe()})", stderr)
        return None
    counter.drop("InstallFailed")
    output = str(step.get("output", ""))
    fail("install", "InstallFailed", f"repository {spec.name!r}: install step `{str(step.get('command'))[:300]}` "
                                     f"exited with {step.get('returncode')}: {_last_lines(output, 4)}; fix the "
                                     f"repository's requirements or set `install` in the manifest", output[-4000:])
    return None


def _failed_step(report) -> dict | None:
    if not isinstance(report, dict) or not isinstance(report.get("steps"), list):
        return None
    failed = [step for step in report["steps"] if isinstance(step, dict) and step.get("returncode") != 0]
    return failed[-1] if failed else None


def _read_json(path: str, limit: int):
    data = read_sandbox_file(path, limit + 1)
    if data is None or len(data) > limit:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _last_lines(text: str, n: int) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])[-800:] or "(no output)"


def trace_request(spec: RepoSpec, worktree: str, env_dir: str, scratch: str, settings: TraceSettings) -> dict:
    """The request `tracers.repo_runner trace` reads."""
    src = os.path.join(env_dir, "src")
    return {
        "worktree": worktree, "scratch": scratch, "venv": os.path.join(env_dir, "venv"),
        "extra_roots": [src] if os.path.isdir(src) else [],
        "include": list(spec.include), "exclude": list(spec.exclude), "test_args": list(spec.test),
        "test_timeout_s": spec.test_timeout_s, "max_log_bytes": MAX_LOG_BYTES,
        "max_forks_per_test": MAX_FORKS_PER_TEST,
        "budgets": {"max_events": spec.max_events or settings.max_events,
                    "max_bytes": spec.max_bytes or settings.max_bytes,
                    "max_entries_per_test": spec.max_entries_per_test,
                    "max_entries_per_function": spec.max_entries_per_function,
                    "max_output_bytes": MAX_OUTPUT_BYTES},
        "limits": {"max_chars": settings.max_chars, "max_items": settings.max_items, "max_depth": settings.max_depth},
    }


def _trace(spec, worktree, env_dir, run_dir, sandbox, settings, counter, result, on_test=None, untraced=False):
    """Run the suite in the trace sandbox and parse its stream (`on_test` gets each test as it is
    parsed); `untraced` runs it the same way without the tracer (the benchmark's baseline)."""
    with counter.timed():
        scratch = os.path.join(run_dir, "scratch")
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        request = dict(trace_request(spec, worktree, env_dir, scratch, settings), untraced=untraced)
        path = _write_request(run_dir, "trace.json", request)
        venv = request["venv"]
        python_path = [TRACERS_PARENT] + [p for p in (os.path.join(worktree, "src"),) if os.path.isdir(p)] + [worktree]
        env = dict(_base_env(), PYTHONPATH=os.pathsep.join(python_path), PYTHONHASHSEED="0",
                   HOME=os.path.join(scratch, "home"), TMPDIR=os.path.join(scratch, "tmp"), VIRTUAL_ENV=venv,
                   PATH=os.path.join(venv, "bin") + ":/usr/local/bin:/usr/bin:/bin")
        limits = SandboxLimits(wall_s=spec.timeout_s, memory_bytes=sandbox.limits.memory_bytes,
                               cpu_s=int(spec.timeout_s) + 1, nproc=sandbox.limits.nproc,
                               file_bytes=MAX_OUTPUT_BYTES + (64 << 20),
                               output_tail_bytes=sandbox.limits.output_tail_bytes)
        binds = [Bind(TRACERS_PARENT + "/tracers"), Bind(worktree), Bind(env_dir), Bind(os.path.join(run_dir, "control")),
                 Bind(scratch, writable=True)]
        started = time.monotonic()
        outcome = sandbox.run([os.path.join(venv, "bin", "python"), "-s", "-B", "-m", "tracers.repo_runner", "trace",
                               path], binds=binds, env=env, cwd=scratch, network=False, limits=limits)
        result.timings["trace_run_s"] = round(time.monotonic() - started, 6)
        out_dir = os.path.join(scratch, "out")
        log_tail = _read_tail(os.path.join(out_dir, "pytest.log"), 16 << 10)
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
        counter.events = result.timings["stream_events"] = sum(test.n_events for test in stream.tests)
        result.timings["tests"] = len(stream.tests)
    counter.seconds -= getattr(on_test, "seconds", 0.0)  # cutting is the cut stage's time
    return stream, log_tail, outcome


def _read_tail(path: str, limit: int) -> str:
    handle = open_sandbox_file(path)
    if handle is None:
        return ""
    with handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - limit))
        return handle.read().decode("utf-8", "replace")


def _report(stream: ParsedStream, log_tail: str, outcome, spec: RepoSpec, counter, fail) -> None:
    """Failure rows for everything that went wrong in the traced run (the traces are kept)."""
    name = repr(spec.name)
    running = stream.tests[-1].nodeid if stream.tests and stream.tests[-1].outcome is None else None
    during = f" while {running} was running" if running else ""
    if stream.header is None and outcome.cause is None:
        fail("trace", "TraceFailed", f"repository {name}: the traced test run produced no output "
                                     f"({outcome.describe()})", log_tail[-4000:] or None)
        return
    for violation in stream.violations:
        kind = VIOLATIONS[violation["kind"]]
        test = violation.get("nodeid") or "collection (conftest or module import)"
        fail("trace", kind, f"repository {name}: {test}: {_VIOLATION_TEXT[violation['kind']]}: "
                            f"{violation.get('detail')}")
    for error in stream.collect_errors:
        fail("trace", "CollectionError", f"repository {name}: collecting {error.get('nodeid') or 'the tests'} "
                                         f"failed: {_last_lines(error.get('message') or '', 3)}",
             (error.get("message") or "")[-4000:] or None)
    failed = [test.nodeid for test in stream.tests if test.outcome in ("failed", "error")]
    if failed:
        fail("trace", "TestsFailed", f"repository {name}: {len(failed)} of {len(stream.tests)} tests failed "
                                     f"(their calls are traced anyway): {', '.join(failed[:10])}"
                                     f"{' ...' if len(failed) > 10 else ''}")
    if stream.error is not None:
        fail("parse", "BadTraceOutput", f"repository {name}: the tracer's output is malformed ({stream.error}); "
                                        f"traces before that point are kept; the tests may have written to it")
    end = stream.end
    if outcome.cause is not None:
        kind = "TraceTimeout" if "wall-clock" in outcome.cause else "TraceKilled"
        hint = (f"raise timeout_s={spec.timeout_s:g} in the manifest or deselect slow tests with `test`"
                if kind == "TraceTimeout" else "the sandbox stopped it")
        fail("trace", kind, f"repository {name}: the traced test run was stopped: {outcome.cause}{during}; "
                            f"traces recorded before are kept; {hint}", log_tail[-4000:] or None)
    elif outcome.returncode == HUNG_EXIT or (end is not None and end.get("exitstatus") is None):
        fail("trace", "TestHung", f"repository {name}: {(end or {}).get('reason') or 'a test hung'}; the run "
                                  f"was ended; traces recorded before are kept", log_tail[-4000:] or None)
    elif end is None and stream.error is None and stream.header is not None:
        fail("trace", "TraceIncomplete", f"repository {name}: the traced test run ended without finishing its "
                                         f"output ({outcome.describe()}){during}", log_tail[-4000:] or None)
    elif end is not None and end.get("reason"):
        fail("trace", "PytestCrashed", f"repository {name}: pytest did not run: {end['reason']}",
             log_tail[-4000:] or None)
    elif end is not None and end.get("exitstatus") in PYTEST_EXITS:
        error_type, text = PYTEST_EXITS[end["exitstatus"]]
        fail("trace", error_type, f"repository {name}: {text} (exit status {end['exitstatus']}): "
                                  f"{_last_lines(log_tail, 3)}", log_tail[-4000:] or None)


_VIOLATION_TEXT = {
    "write": "tried to write outside its scratch directory (refused)",
    "network": "tried to open a network connection, which is off while tests are traced (refused)",
    "fork_bomb": "forked too many processes (a fork bomb); further forks were refused and its processes killed",
    "timeout": "ran past test_timeout_s and was aborted; its open calls are kept as cut traces",
    "output_flood": "flooded its output and was aborted",
}


class EntryCutter:
    """Called with each parsed test: cuts its entries into `traces` rows, identical traces once."""

    def __init__(self, spec: RepoSpec, checkout, settings: TraceSettings, counter: StageCounters):
        self.spec, self.checkout, self.counter = spec, checkout, counter
        self.max_events = spec.max_events or settings.max_events
        self.sources = SourceReader(checkout.path)
        self.rows: list[dict] = []
        self.bad: list[str] = []
        self.seen: set[str] = set()
        self.seconds = 0.0

    def __call__(self, stream: ParsedStream, test: ParsedTest) -> None:
        start = time.perf_counter()
        header = stream.header or {}
        python, version = str(header.get("python"))[:20], str(header.get("tracer_version"))[:20]
        for entry in test.entries:
            self.counter.n_in += 1
            try:
                require(entry["n"] <= self.max_events, f"{entry['n']} events, over max_events={self.max_events}")
                events = cut_entry(test.events, entry)
            except TraceFormatError as error:
                self.bad.append(f"{test.nodeid} {entry['qualname']}: {error}")
                continue
            code = self.sources.block(entry["path"], entry["firstlineno"])
            trace_id = repo_trace_id(entry["path"], entry["qualname"], code, entry["input"], entry["exit"], events)
            if trace_id in self.seen:
                self.counter.drop("duplicate")
                continue
            self.seen.add(trace_id)
            self.rows.append({
                "trace_id": trace_id,
                "source_id": f"{self.spec.name}@{self.checkout.commit}:{entry['path']}:{entry['qualname']}",
                "source_kind": "repo", "repo_url": self.spec.url, "commit": self.checkout.commit,
                "path": entry["path"], "qualname": entry["qualname"], "test_id": test.nodeid, "code": code,
                "input": entry["input"], "python_version": python, "tracer_version": version,
                "exit": entry["exit"], "truncated": entry["truncated"],
                "truncation_reason": entry["reason"] if entry["truncated"] else None,
                "n_events": len(events), "events": events,
            })
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        self.counter.seconds += elapsed

    def finish(self, fail) -> list[dict]:
        if self.bad:
            self.counter.drop("BadEntry", len(self.bad))
            fail("parse", "BadEntry", f"repository {self.spec.name!r}: {len(self.bad)} entries could not be cut "
                                      f"from the stream; first: {self.bad[0]}")
        self.counter.n_out = len(self.rows)
        self.counter.events = sum(row["n_events"] for row in self.rows)
        return self.rows
