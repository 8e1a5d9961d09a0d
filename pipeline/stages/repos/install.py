"""Install a repository in the sandbox: a fresh venv, the worktree read-only, a copy to build in (`env/src`).

The sandbox has no network of its own; pip reaches the package index, and nothing else, through the host's
index proxy (pipeline/sandbox/index_proxy.py) on a unix socket bound into it. A refused connection (a
build reaching for another host) is an `InstallNetworkRefused` failure row of the repository.

What the install did (tracers/install/step.py: which test requirements it read, which fallback step installed, the
editable or regular package, the missing modules it repaired after collection) comes back in install.json's
`how`, untrusted: `read_how` checks every type and size and gives an `InstallHow`. A fallback or a repair that
was needed, or a preparation command of the repository's that failed, is a failure row of its own
(`InstallFallback`, `MissingModuleInstalled`, `MissingModuleUnresolved`, `PrepareCommandFailed`) while the
repository's traces still come; an install that fails is one `InstallFailed` or `InstallTimeout` row.
"""

import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass

from pipeline.engine.failures import Failure
from pipeline.sandbox import Bind, SandboxLimits, SandboxResult
from pipeline.sandbox.index_proxy import IndexProxy, index_hosts, upstream_proxy
from pipeline.sandbox.tracers_mount import tracers_bind
from pipeline.stages.repos.requests import base_env, read_json, write_request
from tracers.install.commands import error_summary
from tracers.install.repair import MAX_MISSING
from tracers.install.step import MAX_ROUNDS
from tracers.install.tox import MAX_COMMANDS

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
MARGIN_S = 30.0  # of install_timeout_s, kept for the venv, the result file and the sandbox's own start and end


@dataclass(frozen=True)
class Attempt:
    """One pip run of the install's steps: which step, with the package editable or not, and why it failed."""

    step: str
    editable: bool | None
    ok: bool
    error: str | None


@dataclass(frozen=True)
class Repair:
    """One round of repairs after collection: what collection reported missing (modules; plugin options like
    `--cov`; `ini:` keys), the distributions installed for it, and what stayed missing."""

    round: int
    modules: tuple[str, ...]
    installed: tuple[str, ...]
    unresolved: tuple[str, ...]
    ok: bool


@dataclass(frozen=True)
class Prepared:
    """One of the repository's own preparation commands (its tox test env's `commands_pre`) and whether it ran
    through."""

    command: str
    ok: bool


@dataclass(frozen=True)
class InstallHow:
    """How the install went: the test requirement sources read (labels like `tox:testenv`, in install order),
    the step that installed (`all`, `without:<labels>`, `relaxed`, `minimal`; `manifest` for a manifest
    `install`), whether the package is an editable install (None: not a package), every pip attempt, the
    repository's preparation commands run after it, the repair rounds, the tests collected at the end (None:
    unknown), and notes on what the reader skipped."""

    sources: tuple[str, ...]
    step: str
    editable: bool | None
    attempts: tuple[Attempt, ...]
    prepared: tuple[Prepared, ...]
    repairs: tuple[Repair, ...]
    collected: int | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Installed:
    """A repository installed: `env_dir` holds `venv/` and `src/` (the copy the install built in)."""

    env_dir: str
    how: InstallHow


def open_up(path: str) -> None:
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


def install_repo(spec, worktree, run_dir, sandbox, pip_cache, counter) -> tuple[Installed | None, list[Failure]]:
    """Install the repository at `worktree` into `run_dir/env`: what was installed (None when the install
    failed), and the repository's failures it found (a refused connection, each fallback and repair, or why
    the install failed)."""
    counter.n_in = 1
    with counter.timed():
        env_dir = os.path.join(run_dir, "env")
        os.makedirs(env_dir)
        src = os.path.join(env_dir, "src")  # builds write into the source tree: give them a copy, package or not
        shutil.copytree(worktree, src, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        open_up(src)
        result = os.path.join(env_dir, "install.json")
        outcome, proxy = _run_install(spec, worktree, run_dir, env_dir, sandbox, pip_cache, result)
        report = read_json(result, 1 << 20)
    failures = [_network_refused(proxy)] if proxy.refused else []  # the install goes on without what was refused
    how, invalid = _read_report(report)
    if how is not None:
        counter.n_out = 1
        return Installed(env_dir, how), failures + report_how(how)
    failure = _install_failure(spec, outcome, report, invalid)
    counter.drop(failure.error_type)
    return None, failures + [failure]


def _run_install(spec, worktree, run_dir, env_dir, sandbox, pip_cache, result) -> tuple[SandboxResult, IndexProxy]:
    """Run `tracers.runners.repos install` in the sandbox, the index proxy serving it on a socket bound in (what
    it writes to `result`: install.json); the sandbox's result and the proxy (what it refused)."""
    short = tempfile.gettempdir() if len(tempfile.gettempdir()) < 60 else "/tmp"  # a socket path: <100 bytes
    socket_dir = tempfile.mkdtemp(prefix="tracegen-index-", dir=short)
    os.chmod(socket_dir, 0o755)
    src = os.path.join(env_dir, "src")
    request = {
        "venv": os.path.join(env_dir, "venv"),
        "src": src,
        "commands": list(spec.install) if spec.install is not None else None,
        "test_args": list(spec.test),
        "budget_s": spec.install_timeout_s - min(MARGIN_S, spec.install_timeout_s / 10),
        "pip_cache": pip_cache,
        "result": result,
        "index_socket": os.path.join(socket_dir, "index.sock"),
    }
    binds = [tracers_bind(), Bind(worktree), Bind(os.path.join(run_dir, "control")), Bind(env_dir, writable=True)]
    ca_bundle = os.environ.get("PIP_CERT") or CA_BUNDLE  # pip trusts what the host trusts (a proxy's CA)
    binds += [Bind(socket_dir)] + ([Bind(ca_bundle)] if os.path.isfile(ca_bundle) else [])
    if pip_cache:
        os.makedirs(pip_cache, exist_ok=True)
        binds.append(Bind(pip_cache, writable=True))
    path = write_request(run_dir, "install.json", request)
    proxy = IndexProxy(request["index_socket"], index_hosts(), upstream_proxy())
    try:
        with proxy:
            outcome = sandbox.run(
                [sandbox.python, "-s", "-B", "-m", "tracers.runners.repos", "install", path],
                binds=binds,
                env=base_env(),
                cwd=src,
                limits=_install_limits(spec, sandbox),
            )
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    if pip_cache:
        open_up(pip_cache)
    return outcome, proxy


def _install_limits(spec, sandbox) -> SandboxLimits:
    """The install's own limits: its manifest time budget, and room for compilers and wheels."""
    return SandboxLimits(
        wall_s=spec.install_timeout_s,
        memory_bytes=max(sandbox.limits.memory_bytes, 4 << 30),
        cpu_s=int(spec.install_timeout_s) + 1,
        nproc=max(sandbox.limits.nproc, 256),
        file_bytes=max(sandbox.limits.file_bytes, 2 << 30),
    )


def _network_refused(proxy: IndexProxy) -> Failure:
    return Failure(
        "install",
        "InstallNetworkRefused",
        f"the install tried to reach "
        f"{', '.join(sorted(set(proxy.refused))[:10])}; only the package index "
        f"({', '.join(sorted(f'{host}:{port}' for host, port in proxy.allowed))}) is reachable "
        f"(refused); set TRACEGEN_INDEX_HOSTS if that host serves the index's files",
    )


def _read_report(report) -> tuple[InstallHow | None, str | None]:
    """How a successful install went (None: it failed, or its report is malformed), and why the report is
    malformed (None: it is not)."""
    if not (isinstance(report, dict) and report.get("ok") is True):
        return None, None
    try:
        return read_how(report.get("how")), None
    except ValueError as error:
        return None, str(error)


def _install_failure(spec, outcome: SandboxResult, report, invalid: str | None) -> Failure:
    """Why the install failed: it ran out of time, its sandbox or report failed, or a step exited with an
    error."""
    stderr = outcome.stderr_tail.decode("utf-8", "replace") or None
    timed_out = isinstance(report, dict) and report.get("timed_out") is True
    if (outcome.cause is not None and "wall-clock" in outcome.cause) or timed_out:
        return Failure(
            "install",
            "InstallTimeout",
            f"the install ran past install_timeout_s="
            f"{spec.install_timeout_s:g}; raise it in the manifest or slim `install`",
            stderr,
        )
    step = None if invalid else failed_step(report)
    if step is None:
        why = (
            f"its report is malformed ({invalid})" if invalid else f"the install sandbox failed ({outcome.describe()})"
        )
        return Failure("install", "InstallFailed", why, stderr)
    output = str(step.get("output", ""))
    return Failure(
        "install",
        "InstallFailed",
        f"install step `{str(step.get('command'))[:300]}` "
        f"exited with {step.get('returncode')}: {error_summary(output)}; fix the "
        f"repository's requirements or set `install` in the manifest",
        output[-4000:],
    )


def failed_step(report) -> dict | None:
    if not isinstance(report, dict) or not isinstance(report.get("steps"), list):
        return None
    failed = [step for step in report["steps"] if isinstance(step, dict) and step.get("returncode") != 0]
    return failed[-1] if failed else None


def report_how(how: InstallHow) -> list[Failure]:
    """A failure for each fallback or repair the install needed (its traces still come)."""
    failures = []
    failed = [attempt for attempt in how.attempts if not attempt.ok]
    if how.step not in ("all", "manifest") and failed:
        done = STEP_TEXT.get(how.step) or f"without {how.step.removeprefix('without:')}"
        failures.append(
            Failure(
                "install",
                "InstallFallback",
                f"installing pytest, the package and its test requirements ({', '.join(how.sources)}) "
                f"failed at step {failed[0].step!r}: {failed[0].error}; installed {done}",
            )
        )
    editable = [attempt for attempt in failed if attempt.editable]
    if how.editable is False and editable:
        failures.append(
            Failure(
                "install",
                "InstallFallback",
                f"the editable install of the package failed ({editable[-1].error}); installed it as a "
                f"regular package, so its tests import it from site-packages rather than env/src",
            )
        )
    for command in how.prepared:
        if not command.ok:
            failures.append(
                Failure(
                    "install",
                    "PrepareCommandFailed",
                    f"the repository's preparation command {command.command!r} (its tox test env's commands_pre) "
                    f"failed: what it makes for the tests is missing (install.json's steps hold its output)",
                )
            )
    for repair in how.repairs:
        found = f"collection (repair round {repair.round}) reported missing"
        if repair.installed:
            failures.append(
                Failure(
                    "install",
                    "MissingModuleInstalled",
                    f"{found} {', '.join(repair.modules)}; installed {', '.join(repair.installed)}",
                )
            )
        if repair.unresolved:
            failures.append(
                Failure(
                    "install",
                    "MissingModuleUnresolved",
                    f"{found} {', '.join(repair.unresolved)}, and no distribution on the index provides it (or its "
                    f"name is ambiguous or the repository's own): tests that import it are not collected",
                )
            )
    return failures


STEP_TEXT = {
    "relaxed": "with every test requirement relaxed to its bare name (no version pins)",
    "minimal": "with pytest and the package only: its declared test requirements are not installed",
}


# -- install.json's `how`, untrusted ---------------------------------------------------------------------------
def _string(limit: int):
    def check(value, what):
        if not isinstance(value, str) or len(value) > limit:
            raise ValueError(f"{what} must be a string of at most {limit} characters")
        return value

    return check


def _boolean(value, what):
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false")
    return value


def _count(low: int, high: int):
    def check(value, what):
        if type(value) is not int or not low <= value <= high:
            raise ValueError(f"{what} must be an integer from {low} to {high}")
        return value

    return check


def _optional(check):
    return lambda value, what: None if value is None else check(value, what)


def _items(check, limit: int):
    def items(value, what):
        if not isinstance(value, list) or len(value) > limit:
            raise ValueError(f"{what} must be a list of at most {limit} items")
        return tuple(check(item, f"{what}[{index}]") for index, item in enumerate(value))

    return items


def _record(kind, fields: dict):
    def record(value, what):
        if not isinstance(value, dict) or set(value) != set(fields):
            raise ValueError(f"{what} must be an object with exactly the keys {', '.join(fields)}")
        return kind(**{key: check(value[key], f"{what}.{key}") for key, check in fields.items()})

    return record


def _step(value, what):
    if not isinstance(value, str) or not re.fullmatch(r"all|relaxed|minimal|manifest|without:.{1,2000}", value):
        raise ValueError(f"{what} must be all, without:<sources>, relaxed, minimal or manifest")
    return value


LABEL = _string(300)
_ATTEMPT = {"step": _step, "editable": _optional(_boolean), "ok": _boolean, "error": _optional(_string(1000))}
_MODULES = _items(_string(200), MAX_MISSING)
_REPAIR = {
    "round": _count(1, MAX_ROUNDS),
    "modules": _MODULES,
    "installed": _MODULES,
    "unresolved": _MODULES,
    "ok": _boolean,
}
_HOW = {
    "sources": _items(LABEL, 64),
    "step": _step,
    "editable": _optional(_boolean),
    "attempts": _items(_record(Attempt, _ATTEMPT), 32),
    "prepared": _items(_record(Prepared, {"command": LABEL, "ok": _boolean}), MAX_COMMANDS),
    "repairs": _items(_record(Repair, _REPAIR), MAX_ROUNDS),
    "collected": _optional(_count(0, 10**9)),
    "notes": _items(LABEL, 20),
}
_READ_HOW = _record(InstallHow, _HOW)


def read_how(value) -> InstallHow:
    """install.json's `how` as an InstallHow; ValueError naming the first field that is wrong."""
    return _READ_HOW(value, "how")
