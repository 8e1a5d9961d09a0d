"""Benchmark: the yield of trace-repos on real repositories — the sdists of popular pure-Python packages that
ship their tests, traced with the pipeline's defaults, against what a human gets by running their suites.

    .venv/bin/python bench/wild.py [--packages N] [--only NAME...] [--forms sdist git] [--code DIR]
                                   [--python VERSION] [--tracer-backends auto settrace monitoring]
                                   [--scratch DIR] [--json OUT] [--record] [--baseline-only]
    .venv/bin/python bench/wild.py --from-json OUT [--record]

Per package of PACKAGES (pinned `name==version`, first N with --packages), all of it under --scratch:
1. the sdist, downloaded from the package index by `pipeline.sources.sdist` (this checkout's; no code run);
2. BASELINE: a copy of its tree, a plain venv outside any sandbox (`python -m venv`, the interpreter the
   sandbox runs: --python's, default this one), `pip install` of the tree with the test dependencies a human
   reads off the project (test extras, dependency groups, requirements files, tox deps: TestDeps, chosen per
   package by reading it; when that install fails, the package and pytest alone), then
   `pytest -p no:cacheprovider -q --junitxml=... --rootdir .` with a per-package timeout. A small plugin
   (`wild_probe`, written to the scratch dir) records each test's node id, outcome and whether it called any
   function of the package (a profile hook on the test's thread, from setup to teardown, that looks for a
   call of a function whose code lives in the installed package or its source tree, test files and module
   bodies (imports) excepted). Cached as `baseline/{name}-{version}-py{X.Y}/result.json`: a later run reuses it.
3. the GIT form: the sdist's files as a fresh git repository (`git init`, one commit, no tags) with what a
   build generates removed, so it looks like a clone: PKG-INFO, `*.egg-info/`, and the version file that
   setuptools-scm / hatch-vcs / pdm config names (`write_to`, `version_file`, `version-file`). Its version
   then comes from the untagged commit (setuptools-scm: 0.1.dev1+g...), as in a shallow CI clone.
4. TRACE each form (--forms): `python -m pipeline.cli trace-repos --manifest M --out O --workers 1` with the
   checkout --code (default: this one), its own `.venv`, `PYTHONPATH` at it, the pipeline's defaults and
   `timeout_s = 300`; one job per package and form, so each has a fresh Ray. The git form exists in every
   checkout; the sdist form only where `sdist = ...` does. With --python the job gets `--python` too; with
   --tracer-backends, one job per backend (`--tracer-backend`), one after the other per package, so the
   backends are measured side by side on the same machine state, and a table compares their trace stage.

Reported per package and in total: tests passing in the baseline (P), those of them that call the package
(C), tests traced (T: distinct `test_id` of `traces` rows that are among the P node ids; a test all of whose
entries repeat an earlier test's traces has no row of its own, so T undercounts the tests the tracer saw:
`tests_run_traced`, the trace stage's count, and `duplicate_entries` are kept beside it), T/P and T/C,
repositories with at least one trace, failures by `error_type` (failures table, with an example message),
wall time of each job, and the peak memory of the Ray worker that ran the unit: `VmHWM` (the kernel's
high-water mark of resident memory, what `getrusage(RUSAGE_SELF).ru_maxrss` reports from inside) of every
Ray worker process (cmdline `ray::...` or `default_worker.py`) under the job, polled every 0.5 s from here
until the job exits; the largest is the worker's peak (a fresh Ray per job: nothing carries over). The
sandboxed test run's processes are reported apart (`peak_run_mb`: the largest VmHWM under the job whose
cmdline runs `tracers.runners.repos`).

--record appends a dated section to bench/RESULTS.md; --json writes everything (rerun on two commits with
--code to compare), as it goes; `--only NAME...` measures just those packages and, with --json, merges them
into that file (a package fixed and re-measured without redoing the rest); --from-json prints (and records)
a JSON's results. The baseline is cached by name==version and its test dependencies in the scratch dir;
--baseline-only stops there. SIGINT stops the run and reports what it measured.
"""

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.sandbox.interpreters import Interpreter, describe, resolve_python  # noqa: E402
from pipeline.sources.sdist.cache import SdistCache  # noqa: E402
from pipeline.sources.sdist.index import normalize, parse_pin  # noqa: E402

TRACE_TIMEOUT_S = 300  # the manifest's timeout_s (the brief's: the pipeline's defaults otherwise)
BASELINE_INSTALL_TIMEOUT_S = 900
BASELINE_TEST_TIMEOUT_S = 900
JOB_TIMEOUT_S = 2400  # one trace-repos job (install, untraced run, traced run, cut, write)
RUNNING: list[subprocess.Popen] = []  # the job in progress (killed with the bench on SIGINT)
BASELINE_FORMAT = 2  # bump when the baseline's method changes: cached results of another format are redone


@dataclass(frozen=True)
class TestDeps:
    """What a human installs to run a package's tests: its test `extras`, `requirements` files (relative to
    the tree), and `deps` (from dependency groups, tox or CI config, lint and coverage tools left out);
    `source` says where they are declared."""

    extras: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()
    source: str = "none declared: pytest alone"


@dataclass(frozen=True)
class JobOptions:
    """How a trace-repos job runs besides its manifest: `--tracer-backend` and `--python` (None: its default)."""

    backend: str = "auto"
    python: str | None = None


@dataclass(frozen=True)
class Package:
    pin: str
    kind: str
    test: TestDeps = field(default_factory=TestDeps)


# The first 12 are a varied subset (--packages 12) for a short run on a busy machine.
PACKAGES = (
    Package("six==1.17.0", "utility (py2/3 compat)"),
    Package("toolz==1.2.0", "utility (functional)", TestDeps(deps=("pycodestyle",), source="group test")),
    Package("inflection==0.5.1", "text"),
    Package("tabulate==0.10.0", "text tables", TestDeps(source="tox: pytest")),
    Package("sqlparse==0.6.1", "SQL formatting", TestDeps(source="group dev: pytest (+ tools)")),
    Package("isodate==0.7.2", "date/time parsing", TestDeps(source="tox: pytest")),
    Package("tenacity==9.2.1", "retry", TestDeps(extras=("test",), source="extra test")),
    Package("click==8.5.1", "CLI framework", TestDeps(source="group tests: pytest")),
    Package("jmespath==1.1.0", "query language parser"),
    Package("parse==1.22.4", "parser (format strings)", TestDeps(deps=("pytest-cov",), source="addopts: --cov")),
    Package("xmltodict==1.0.4", "markup (XML)", TestDeps(extras=("test",), source="extra test")),
    Package("cachetools==8.0.2", "data structures (caches)", TestDeps(source="tox: pytest")),
    Package("toml==0.10.2", "parser (TOML)", TestDeps(deps=("numpy",), source="tox deps")),
    Package("tomlkit==0.15.3", "parser (TOML, style-preserving)", TestDeps(deps=("PyYAML",), source="group dev")),
    Package("semver==3.1.2", "version parsing", TestDeps(deps=("pytest-cov",), source="group test (addopts: --cov)")),
    Package("python-slugify==9.2.0", "text (slugs)", TestDeps(source="tox: pytest")),
    Package("humanize==4.17.0", "text (numbers, dates)", TestDeps(extras=("tests",), source="extra tests")),
    Package("croniter==7.0.0", "date/time (cron)", TestDeps(deps=("pytz",), source="group dev")),
    Package(
        "python-dateutil==4.0.0",
        "date/time",
        TestDeps(requirements=("requirements-dev.txt",), source="requirements-dev.txt (tox)"),
    ),
    Package("idna==3.20", "text (IDNA encoding)", TestDeps(deps=("hypothesis",), source="extra all (tools left out)")),
    Package(
        "pyparsing==3.3.3",
        "parser (combinators)",
        TestDeps(extras=("diagrams",), source="extra diagrams: tests/test_diagram.py imports it"),
    ),
    Package("more-itertools==11.2.1", "utility (iterators)", TestDeps(source="requirements/testing.txt: tools only")),
    Package("boltons==26.2.0", "utility (grab bag)", TestDeps(source="group dev: pytest")),
    Package("glom==25.12.0", "data structures (nested access)", TestDeps(requirements=("requirements.txt",))),
    Package(
        "attrs==26.1.0",
        "data classes",
        TestDeps(deps=("cloudpickle", "hypothesis", "pympler", "pytest-xdist[psutil]"), source="group tests (uv.lock)"),
    ),
    Package("natsort==8.4.0", "sorting", TestDeps(deps=("pytest-mock", "hypothesis"), source="tox deps")),
    Package(
        "pathspec==1.1.1",
        "text (gitignore patterns)",
        TestDeps(deps=("pytest-benchmark", "typing-extensions"), source="group dev"),
    ),
    Package("mistune==3.4.0", "markup (Markdown)", TestDeps(source="group test: pytest (+ tools)")),
    Package(
        "intervaltree==3.2.1",
        "data structures (interval tree)",
        TestDeps(requirements=("requirements/pytest.txt",), source="requirements/pytest.txt"),
    ),
    Package("stamina==26.1.0", "retry", TestDeps(deps=("anyio", "dirty-equals"), source="group tests")),
)

PROBE = r'''
"""wild_probe: each test's node id, outcome and whether it called the package under test (bench/wild.py)."""
import importlib.metadata
import json
import os
import sys

import pytest

_OUT = open(os.environ["WILD_PROBE_OUT"], "a", buffering=1)
_ROOTS = None
_SEEN = {}


def _roots():
    files = importlib.metadata.distribution(os.environ["WILD_DIST"]).files or ()
    tops = {f.parts[0] for f in files if f.parts and not f.parts[0].endswith((".dist-info", ".egg-info", ".data"))
            and f.parts[0] not in ("..", "__pycache__") and not f.parts[0].endswith(".pth")}
    base = str(importlib.metadata.distribution(os.environ["WILD_DIST"]).locate_file(""))
    here = os.getcwd()
    found = []
    for top in tops:
        for place in (base, here, os.path.join(here, "src")):
            found.append(os.path.realpath(os.path.join(place, top)))
    return tuple(found)


def _is_package_code(filename):
    known = _SEEN.get(filename)
    if known is None:
        path = os.path.realpath(filename)
        name = os.path.basename(path)
        parts = path.split(os.sep)
        test = name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or any(
            part in ("tests", "test", "testing") for part in parts[:-1])
        known = _SEEN[filename] = not test and any(path == root or path.startswith(root + os.sep) for root in _ROOTS)
    return known


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _ROOTS
    if _ROOTS is None:
        _ROOTS = _roots()
    state = _STATES[item.nodeid] = {"calls": False, "outcome": "passed"}

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name != "<module>" and _is_package_code(frame.f_code.co_filename):
            state["calls"] = True
            sys.setprofile(None)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        _OUT.write(json.dumps([item.nodeid, state["outcome"], state["calls"]]) + "\n")


def pytest_runtest_logreport(report):
    state = _STATES.get(report.nodeid)
    if state is None:
        return
    if report.failed:
        state["outcome"] = "failed" if report.when == "call" else "error"
    elif report.skipped and state["outcome"] == "passed":
        state["outcome"] = "skipped"


_STATES = {}
'''


# -- baseline -------------------------------------------------------------------------------------------------
def run(argv: list[str], cwd: str, log, timeout: float, env: dict | None = None) -> tuple[int | None, float]:
    """Run argv with its output appended to `log`; (exit code or None when it timed out, seconds)."""
    start = time.monotonic()
    log.write(f"\n$ {' '.join(argv)}\n")
    log.flush()
    process = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()
        code = None
    return code, time.monotonic() - start


def interpreter(spec: str | None) -> Interpreter:
    """The Python the sandbox runs: --python's (a version, path or command), else this one's real executable."""
    return describe(resolve_python(spec) if spec else os.path.realpath(sys.executable))


def baseline(package: Package, tree: str, scratch: Path, python: Interpreter) -> dict:
    """The package's suite in a plain venv (cached; see the module docstring)."""
    name, version = parse_pin(package.pin)
    where = scratch / "baseline" / f"{normalize(name)}-{version}-py{python.version[0]}.{python.version[1]}"
    cached = where / "result.json"
    if cached.exists():
        result = json.loads(cached.read_text())
        if result.get("format") == BASELINE_FORMAT and result.get("test_deps") == test_deps(package):
            return result
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    src = where / "src"
    shutil.copytree(tree, src, symlinks=True)
    probe_dir = scratch / "probe"
    probe_dir.mkdir(exist_ok=True)
    (probe_dir / "wild_probe.py").write_text(PROBE)
    venv = where / "venv"
    pip_cache = str(scratch / "pip-cache")
    with open(where / "log.txt", "w") as log:
        run([python.path, "-m", "venv", str(venv)], str(where), log, 120)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--cache-dir", pip_cache, "-q"]
        target = str(src) + (f"[{','.join(package.test.extras)}]" if package.test.extras else "")
        wanted = [target, "pytest", *package.test.deps]
        for requirement in package.test.requirements:
            wanted += ["-r", str(src / requirement)]
        code, install_s = run(pip + wanted, str(src), log, BASELINE_INSTALL_TIMEOUT_S)
        installed = "declared"
        if code != 0:
            code, more = run(pip + [str(src), "pytest"], str(src), log, BASELINE_INSTALL_TIMEOUT_S)
            install_s += more
            installed = "package and pytest only (the declared test dependencies did not install)"
            if code != 0:
                installed = "failed"
        tests, test_s, exit_code = {}, 0.0, None
        if installed != "failed":
            env = dict(os.environ, PYTHONPATH=str(probe_dir), WILD_PROBE_OUT=str(where / "probe.jsonl"))
            env["WILD_DIST"] = name
            argv = [str(venv / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "wild_probe"]
            argv += [f"--junitxml={where / 'junit.xml'}", "--rootdir", str(src)]
            exit_code, test_s = run(argv, str(src), log, BASELINE_TEST_TIMEOUT_S, env)
            if os.path.exists(where / "probe.jsonl"):
                for line in open(where / "probe.jsonl"):
                    nodeid, outcome, calls = json.loads(line)
                    tests[nodeid] = [outcome, calls]
    result = {
        "format": BASELINE_FORMAT,
        "pin": package.pin,
        "installed": installed,
        "test_deps": test_deps(package),
        "install_s": round(install_s, 1),
        "test_s": round(test_s, 1),
        "pytest_exit": exit_code,
        "timed_out": installed != "failed" and exit_code is None,
        "tests": tests,
    }
    shutil.rmtree(venv, ignore_errors=True)  # hundreds of MB each; the result is what is kept
    shutil.rmtree(src, ignore_errors=True)
    cached.write_text(json.dumps(result))
    return result


def test_deps(package: Package) -> dict:
    """The test dependencies as the cached result records them (a change redoes the baseline)."""
    return {
        "extras": list(package.test.extras),
        "requirements": list(package.test.requirements),
        "deps": list(package.test.deps),
        "source": package.test.source,
    }


def baseline_counts(result: dict) -> dict:
    outcomes = Counter(outcome for outcome, _ in result["tests"].values())
    passing = {nodeid for nodeid, (outcome, _) in result["tests"].items() if outcome == "passed"}
    calling = {nodeid for nodeid in passing if result["tests"][nodeid][1]}
    return {"outcomes": dict(outcomes), "passing": passing, "calling": calling}


# -- the git form ---------------------------------------------------------------------------------------------
def version_files(tree: str) -> list[str]:
    """The files a VCS-versioning build backend writes, as its pyproject.toml config names them."""
    path = os.path.join(tree, "pyproject.toml")
    if not os.path.isfile(path):
        return []
    with open(path, "rb") as handle:
        tool = tomllib.load(handle).get("tool", {})
    hatch = tool.get("hatch", {})
    hooks = [hatch.get("build", {}).get("hooks", {}).get("vcs", {})]
    hooks += [target.get("hooks", {}).get("vcs", {}) for target in hatch.get("build", {}).get("targets", {}).values()]
    names = [tool.get("setuptools_scm", {}).get(key) for key in ("write_to", "version_file")]
    names += [hook.get(key) for hook in hooks for key in ("version-file", "version_file")]
    names += [tool.get("pdm", {}).get("version", {}).get(key) for key in ("write_to", "version_file")]
    return sorted({name for name in names if isinstance(name, str) and name})


def git_form(package: Package, tree: str, scratch: Path) -> str:
    """The sdist's files as a one-commit, untagged git repository with build outputs removed (module doc)."""
    name, version = parse_pin(package.pin)
    repo = scratch / "git" / f"{normalize(name)}-{version}"
    if (repo / ".git").is_dir():
        return str(repo)
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(tree, repo, symlinks=True)
    removed = ["PKG-INFO", *version_files(str(repo)), *(os.path.basename(p) for p in glob.glob(f"{repo}/*.egg-info"))]
    removed += [os.path.relpath(p, repo) for p in glob.glob(f"{repo}/src/*.egg-info")]
    for relative in removed:
        target = repo / relative
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    env = dict(os.environ, GIT_AUTHOR_NAME="wild", GIT_AUTHOR_EMAIL="wild@bench", GIT_COMMITTER_NAME="wild")
    env.update(GIT_COMMITTER_EMAIL="wild@bench", GIT_AUTHOR_DATE="2026-01-01T00:00:00Z")
    env.update(GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "sdist"]):
        subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)
    (repo / ".git" / "wild-removed.json").write_text(json.dumps(removed))
    return str(repo)


# -- one traced job -------------------------------------------------------------------------------------------
class WorkerMemory:
    """Polls the processes under `pid`: the largest VmHWM of a Ray worker, and of a sandboxed test run."""

    def __init__(self, pid: int):
        self.pid, self.worker_kb, self.run_kb = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            for pid in descendants(self.pid):
                try:
                    cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                    status = open(f"/proc/{pid}/status").read()
                except OSError:
                    continue
                found = re.search(r"VmHWM:\s+(\d+) kB", status)
                peak = int(found.group(1)) if found else 0
                if cmdline.startswith("ray::") or "default_worker.py" in cmdline:
                    self.worker_kb = max(self.worker_kb, peak)
                elif "tracers.runners.repos" in cmdline:
                    self.run_kb = max(self.run_kb, peak)


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def manifest_table(name: str, form: str, package: Package, repo: str | None) -> str:
    source = f'sdist = "{package.pin}"' if form == "sdist" else f'url = "{repo}"\nref = "main"'
    return f'[[repo]]\nname = "{name}"\n{source}\ntimeout_s = {TRACE_TIMEOUT_S}\n'


def trace_job(package: Package, form: str, repo: str | None, code: Path, scratch: Path, job: JobOptions) -> dict:
    """One trace-repos job of one package in one form: what it wrote and what it cost."""
    name, version = parse_pin(package.pin)
    run_dir = scratch / "runs" / f"{form}-{job.backend}-{normalize(name)}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    manifest = run_dir / "repos.toml"
    manifest.write_text(manifest_table(normalize(name), form, package, repo))
    out = run_dir / "out"
    argv = [str(code / ".venv" / "bin" / "python"), "-m", "pipeline.cli", "trace-repos", "--manifest", str(manifest)]
    argv += ["--out", str(out), "--workers", "1", "--cache-dir", str(scratch / "tracegen-cache")]
    argv += ["--tracer-backend", job.backend] + (["--python", job.python] if job.python else [])
    env = dict(os.environ, PYTHONPATH=str(code))
    start = time.monotonic()
    with open(run_dir / "job.log", "w") as log:
        process = subprocess.Popen(
            argv, cwd=code, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        memory = WorkerMemory(process.pid)
        try:
            exit_code = process.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            exit_code = process.wait()
        memory.stop()
    seconds = time.monotonic() - start
    traces = read_table(out, "traces", ["test_id", "commit", "tracer_version"])
    failures = read_table(out, "failures", ["stage", "error_type", "message"])
    runs = read_table(out, "repo_runs", ["tests_traced"])
    stats = {}
    if (out / "manifest.json").exists():
        stats = json.loads((out / "manifest.json").read_text()).get("stats", {})
    return {
        "exit": exit_code,
        "seconds": round(seconds, 1),
        "rows": len(traces),
        "commits": sorted({row["commit"] for row in traces}),
        "test_ids": sorted({row["test_id"] for row in traces if row["test_id"]}),
        "failures": failures,
        "stage_seconds": {
            stage: round(value.get("seconds", 0.0), 1)
            for stage, value in stats.items()
            if isinstance(value, dict) and "seconds" in value
        },
        "tests_run_traced": stats.get("trace", {}).get("out", 0),
        "tests_traced_stage": sum(row["tests_traced"] or 0 for row in runs),
        "backend": job.backend,
        "tracer_versions": sorted({row["tracer_version"] for row in traces}),
        "duplicate_entries": stats.get("cut", {}).get("dropped", {}).get("duplicate", 0),
        "peak_worker_mb": round(memory.worker_kb / 1024, 1),
        "peak_run_mb": round(memory.run_kb / 1024, 1),
    }


def read_table(out: Path, table: str, columns: list[str]) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(str(out / table / "*.parquet"))):
        rows += pq.read_table(path, columns=columns).to_pylist()
    return rows


# -- the numbers ----------------------------------------------------------------------------------------------
def summarize(package: Package, base: dict, job: dict | None) -> dict:
    counts = baseline_counts(base)
    result = {
        "pin": package.pin,
        "kind": package.kind,
        "passing": len(counts["passing"]),
        "calling": len(counts["calling"]),
        "outcomes": counts["outcomes"],
        "baseline_installed": base["installed"],
        "baseline_timed_out": base["timed_out"],
    }
    if job is None:
        return result
    traced = set(job["test_ids"]) & counts["passing"]
    by_type = Counter(row["error_type"] for row in job["failures"])
    examples = {}
    for row in job["failures"]:
        examples.setdefault(row["error_type"], f"[{row['stage']}] {row['message'][:400]}")
    result.update(
        traced=len(traced),
        traced_calling=len(traced & counts["calling"]),
        traced_any=len(job["test_ids"]),
        rows=job["rows"],
        failures=dict(by_type.most_common()),
        failure_examples=examples,
        seconds=job["seconds"],
        stage_seconds=job["stage_seconds"],
        tests_run_traced=job["tests_run_traced"],
        tests_traced_stage=job["tests_traced_stage"],
        backend=job["backend"],
        tracer_versions=job["tracer_versions"],
        duplicate_entries=job["duplicate_entries"],
        peak_worker_mb=job["peak_worker_mb"],
        peak_run_mb=job["peak_run_mb"],
        commits=job["commits"],
        job_exit=job["exit"],
    )
    return result


def totals(rows: list[dict]) -> dict:
    done = [row for row in rows if "traced" in row]
    failures = Counter()
    for row in done:
        failures.update(row["failures"])
    passing = sum(row["passing"] for row in done)
    calling = sum(row["calling"] for row in done)
    traced = sum(row["traced"] for row in done)
    stage = sum(row.get("tests_traced_stage", 0) for row in done)
    return {
        "packages": len(done),
        "with_traces": sum(1 for row in done if row["rows"] > 0),
        "passing": passing,
        "calling": calling,
        "traced": traced,
        "traced_of_passing": round(traced / passing, 4) if passing else None,
        "traced_of_calling": round(sum(row["traced_calling"] for row in done) / calling, 4) if calling else None,
        "traced_stage": stage,
        "traced_stage_of_passing": round(stage / passing, 4) if passing else None,
        "failures": dict(failures.most_common()),
        "seconds": round(sum(row["seconds"] for row in done), 1),
        "peak_worker_mb": max((row["peak_worker_mb"] for row in done), default=0),
    }


def result_key(form: str, backend: str, backends: list[str]) -> str:
    """Where a job's row goes in the results: by form, and by backend when the run compares backends."""
    return form if backends == ["auto"] else f"{form}/{backend}"


def backend_table(forms: dict) -> str:
    """Per package measured with several backends: trace stage seconds and yield side by side ("" if none)."""
    by_form: dict[str, list[str]] = {}
    for key in forms:
        if "/" in key:
            form, backend = key.split("/", 1)
            by_form.setdefault(form, []).append(backend)
    text = ""
    for form, backends in by_form.items():
        if len(backends) < 2:
            continue
        first = backends[0]
        rows = {b: {row["pin"]: row for row in forms[f"{form}/{b}"]["packages"] if "traced" in row} for b in backends}
        head = " | ".join(f"trace s {b} | traced {b}" for b in backends)
        lines = [
            "",
            "",
            f"**{form} form, backends side by side** (trace stage seconds, tests traced incl. duplicates ÷ passing)",
            "",
            f"| package | passing | {head} | " + " | ".join(f"{b} ÷ {first}" for b in backends[1:]) + " |",
            "|---|---|" + "---|---|" * len(backends) + "---|" * (len(backends) - 1),
        ]
        sums = Counter()
        for pin, row in rows[first].items():
            if not all(pin in rows[b] for b in backends):
                continue
            cells, trace_s = [], {}
            for b in backends:
                other = rows[b][pin]
                trace_s[b] = other["stage_seconds"].get("trace", 0.0)
                sums[b] += trace_s[b]
                cells.append(f"{trace_s[b]:.1f} | {other.get('tests_traced_stage', 0)}")
            ratios = [f"{trace_s[b] / trace_s[first]:.2f}" if trace_s[first] else "—" for b in backends[1:]]
            lines.append(f"| {pin} | {row['passing']} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        total = " | ".join(f"{sums[b]:.1f} | " for b in backends)
        ratios = [f"{sums[b] / sums[first]:.2f}" if sums[first] else "—" for b in backends[1:]]
        lines.append("| **all** | | " + total + " | " + " | ".join(ratios) + " |")
        text += "\n".join(lines)
    return text


def table(key: str, rows: list[dict], total: dict) -> str:
    form, _, backend = key.partition("/")
    label = f"{form} form, {backend} backend" if backend else f"{form} form"
    lines = [
        f"**{label}** — {total['with_traces']} of {total['packages']} repositories with ≥1 trace; tests traced "
        f"{total['traced']:,} of {total['passing']:,} passing untraced ({pct(total['traced_of_passing'])}), of "
        f"{total['calling']:,} that call the package ({pct(total['traced_of_calling'])}); with the tests whose "
        f"traces all repeat stored ones (T′) {total.get('traced_stage', 0):,} "
        f"({pct(total.get('traced_stage_of_passing'))}); "
        f"{total['seconds']:,.0f} s of jobs; peak worker {total['peak_worker_mb']:,.0f} MB",
        "",
        "| package | passing (call pkg) | traced | T/P | T′ | T′/P | rows | job s | worker MB | run MB | failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "traced" not in row:
            continue
        top = ", ".join(f"{kind} {count}" for kind, count in list(row["failures"].items())[:3]) or "—"
        ratio = pct(row["traced"] / row["passing"]) if row["passing"] else "—"
        stage = row.get("tests_traced_stage")
        stage_ratio = pct(stage / row["passing"]) if row["passing"] and stage is not None else "—"
        lines.append(
            f"| {row['pin']} | {row['passing']} ({row['calling']}) | {row['traced']} | {ratio} | "
            f"{'—' if stage is None else stage} | {stage_ratio} | {row['rows']:,} | "
            f"{row['seconds']:.0f} | {row['peak_worker_mb']:.0f} | {row['peak_run_mb']:.0f} | {top} |"
        )
    lines += ["", f"Failures by type: {', '.join(f'{k} {v}' for k, v in total['failures'].items()) or 'none'}"]
    return "\n".join(lines)


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def code_label(code: Path) -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=code, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "pipeline", "tracers"], cwd=code, capture_output=True, text=True
    ).stdout.strip()
    return (found.stdout.strip() or "?") + ("+dirty" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=len(PACKAGES), help="the first N packages of PACKAGES")
    parser.add_argument("--only", nargs="+", default=(), help="just these projects (names); with --json, merged in")
    parser.add_argument("--forms", nargs="+", choices=("sdist", "git"), default=["sdist", "git"])
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose pipeline traces (its .venv)")
    parser.add_argument("--python", help="the interpreter of the baselines and the jobs' --python (default: this one)")
    parser.add_argument(
        "--tracer-backends",
        nargs="+",
        choices=("auto", "settrace", "monitoring"),
        default=["auto"],
        help="one job per backend and package, side by side (more than one: a table compares them)",
    )
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/wild-bench"))
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument("--from-json", type=Path, help="measure nothing: print (and --record) this JSON's results")
    parser.add_argument("--record", action="store_true", help="append the results to bench/RESULTS.md")
    parser.add_argument("--baseline-only", action="store_true", help="download and run the baselines, trace nothing")
    args = parser.parse_args()
    if args.from_json:
        document = json.loads(args.from_json.read_text())
    else:
        document = run_bench(args)
        if args.baseline_only:
            return
    text = "\n\n".join(
        table(key, part["packages"], totals(part["packages"])) for key, part in document["forms"].items()
    )
    text += backend_table(document["forms"])
    print(text)
    if args.record:
        record(document, text)


def run_bench(args) -> dict:
    """Measure the packages asked for; the JSON document of the results (merged into --json's with --only)."""
    args.scratch.mkdir(parents=True, exist_ok=True)
    code = args.code.resolve()
    only = {normalize(name) for name in args.only}
    packages = [p for p in PACKAGES[: args.packages] if not only or normalize(parse_pin(p.pin)[0]) in only]
    earlier = json.loads(args.json.read_text()) if args.only and args.json and args.json.exists() else None
    if earlier is not None and earlier["code"] != str(code):
        raise SystemExit(f"--only merges into {args.json}, which measured {earlier['code']}, not {code}")
    sdists = SdistCache(str(args.scratch / "sdists"))
    started = time.monotonic()
    results = {
        result_key(form, backend, args.tracer_backends): [] for form in args.forms for backend in args.tracer_backends
    }
    baselines = {}

    def save() -> dict:
        document = merge(earlier, json_document(args, code, results, baselines, time.monotonic() - started))
        if args.json:
            args.json.write_text(json.dumps(document, indent=1, default=list))
        return document

    try:
        measure(args, code, packages, sdists, results, baselines, save)
    except KeyboardInterrupt:  # SIGINT: stop where it is, and report what was measured
        if RUNNING:
            os.killpg(RUNNING[0].pid, 9)
        print(f"interrupted after {len(baselines)} of {len(packages)} packages", flush=True)
    return save()


def measure(args, code: Path, packages, sdists: SdistCache, results: dict, baselines: dict, save) -> None:
    """Baseline, then each form's job, package after package (results and baselines filled as it goes)."""
    python = interpreter(args.python)
    for package in packages:
        tree = sdists.checkout(package.pin).path
        base = baselines[package.pin] = baseline(package, tree, args.scratch, python)
        counts = baseline_counts(base)
        print(
            f"{package.pin}: baseline {len(counts['passing'])} passing ({len(counts['calling'])} call the "
            f"package), {counts['outcomes']}, install: {base['installed']}",
            flush=True,
        )
        if args.baseline_only:
            continue
        for form in args.forms:
            repo = git_form(package, tree, args.scratch) if form == "git" else None
            for backend in args.tracer_backends:
                job = JobOptions(backend=backend, python=args.python)
                row = summarize(package, base, trace_job(package, form, repo, code, args.scratch, job))
                results[result_key(form, backend, args.tracer_backends)].append(row)
                print(
                    f"  {result_key(form, backend, args.tracer_backends)}: traced {row['traced']} of "
                    f"{row['passing']} ({row['rows']} rows) in {row['seconds']:.0f} s (trace stage "
                    f"{row['stage_seconds'].get('trace', 0):.0f} s), worker {row['peak_worker_mb']:.0f} MB, "
                    f"failures {row['failures']}",
                    flush=True,
                )
        save()  # as it goes: a long run killed midway keeps what it measured


def json_document(args, code: Path, results: dict, baselines: dict, wall: float) -> dict:
    traced = {row["pin"] for rows in results.values() for row in rows}
    return {
        "code": str(code),
        "code_commit": code_label(code),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": args.python or platform.python_version(),
        "tracer_backends": args.tracer_backends,
        "cores": os.cpu_count(),
        "trace_timeout_s": TRACE_TIMEOUT_S,
        "command": " ".join(sys.argv[1:]),
        "packages": [pin for pin in baselines if args.baseline_only or pin in traced],
        "wall_s": round(wall, 1),
        "forms": {form: {"packages": rows, "totals": totals(rows)} for form, rows in results.items()},
        "baselines": {
            pin: {k: v for k, v in base.items() if k != "tests"}
            | {"counts": {key: len(value) for key, value in baseline_counts(base).items() if key != "outcomes"}}
            for pin, base in baselines.items()
        },
    }


def merge(earlier: dict | None, new: dict) -> dict:
    """`new`'s packages in place of the same packages of `earlier` (a rerun of a few), in PACKAGES order."""
    if earlier is None:
        return new
    order = {package.pin: index for index, package in enumerate(PACKAGES)}
    merged = dict(new, wall_s=round(earlier["wall_s"] + new["wall_s"], 1), merged=earlier.get("merged", 0) + 1)
    merged["command"] = f"{earlier.get('command', '?')}`, then `{new['command']}"
    merged["packages"] = sorted(set(earlier["packages"]) | set(new["packages"]), key=lambda pin: order.get(pin, 0))
    merged["baselines"] = earlier["baselines"] | new["baselines"]
    merged["forms"] = {}
    for form in earlier["forms"].keys() | new["forms"].keys():
        rows = {row["pin"]: row for row in earlier["forms"].get(form, {}).get("packages", [])}
        rows |= {row["pin"]: row for row in new["forms"].get(form, {}).get("packages", [])}
        ordered = sorted(rows.values(), key=lambda row: order.get(row["pin"], 0))
        merged["forms"][form] = {"packages": ordered, "totals": totals(ordered)}
    return merged


def record(document: dict, text: str) -> None:
    """Append the results to bench/RESULTS.md under `## Wild repositories`."""
    measured = len(document["packages"])
    note = (
        f"{document['date'][:10]}, `$ .venv/bin/python bench/wild.py {document['command']}` (pipeline at "
        f"{document['code_commit']}, CPython {document['python']}, {document['cores']} cores, "
        f"{measured} of the {len(PACKAGES)} packages, {document['wall_s'] / 60:.0f} min of measuring"
        f"{', some packages rerun and merged in' if document.get('merged') else ''}):"
    )
    with open(ROOT / "bench" / "RESULTS.md", "a", encoding="utf-8") as handle:
        handle.write(f"\n## Wild repositories\n\n{note}\n\n{text}\n")


if __name__ == "__main__":
    main()
