"""Install a repository in the sandbox: a fresh venv, the worktree read-only, a copy to build in.

The sandbox has no network of its own; pip reaches the package index, and nothing else, through the host's
index proxy (pipeline/sandbox/index_proxy.py) on a unix socket bound into it. A refused connection (a
build reaching for another host) is an `InstallNetworkRefused` failure row of the repository.
"""

import os
import shutil
import stat
import tempfile

from pipeline.sandbox import Bind, SandboxLimits
from pipeline.sandbox.index_proxy import IndexProxy, index_hosts, upstream_proxy
from pipeline.sandbox.tracers import tracers_bind
from pipeline.stages.repos.requests import base_env, last_lines, read_json, write_request

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def is_package(worktree: str) -> bool:
    return any(os.path.isfile(os.path.join(worktree, name)) for name in ("pyproject.toml", "setup.py", "setup.cfg"))


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


def install_repo(spec, worktree, run_dir, sandbox, pip_cache, counter, fail) -> str | None:
    counter.n_in = 1
    with counter.timed():
        env_dir = os.path.join(run_dir, "env")
        os.makedirs(env_dir)
        src = None
        if spec.install is not None or is_package(worktree):
            src = os.path.join(env_dir, "src")  # builds write into the source tree: give them a copy
            shutil.copytree(worktree, src, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            open_up(src)
        request = {
            "venv": os.path.join(env_dir, "venv"),
            "src": src or worktree,
            "commands": list(spec.install) if spec.install is not None else None,
            "pip_cache": pip_cache,
            "result": os.path.join(env_dir, "install.json"),
        }
        short = tempfile.gettempdir() if len(tempfile.gettempdir()) < 60 else "/tmp"  # a socket path: <100 bytes
        socket_dir = tempfile.mkdtemp(prefix="tracegen-index-", dir=short)
        os.chmod(socket_dir, 0o755)
        request["index_socket"] = os.path.join(socket_dir, "index.sock")
        binds = [tracers_bind(), Bind(worktree), Bind(os.path.join(run_dir, "control")), Bind(env_dir, writable=True)]
        ca_bundle = os.environ.get("PIP_CERT") or CA_BUNDLE  # pip trusts what the host trusts (a proxy's CA)
        binds += [Bind(socket_dir)] + ([Bind(ca_bundle)] if os.path.isfile(ca_bundle) else [])
        if pip_cache:
            os.makedirs(pip_cache, exist_ok=True)
            binds.append(Bind(pip_cache, writable=True))
        path = write_request(run_dir, "install.json", request)
        limits = SandboxLimits(
            wall_s=spec.install_timeout_s,
            memory_bytes=max(sandbox.limits.memory_bytes, 4 << 30),
            cpu_s=int(spec.install_timeout_s) + 1,
            nproc=max(sandbox.limits.nproc, 256),
            file_bytes=max(sandbox.limits.file_bytes, 2 << 30),
        )
        proxy = IndexProxy(request["index_socket"], index_hosts(), upstream_proxy())
        try:
            with proxy:
                outcome = sandbox.run(
                    [sandbox.python, "-s", "-B", "-m", "tracers.repo_runner", "install", path],
                    binds=binds,
                    env=base_env(),
                    cwd=request["src"],
                    limits=limits,
                )
        finally:
            shutil.rmtree(socket_dir, ignore_errors=True)
        if pip_cache:
            open_up(pip_cache)
        report = read_json(request["result"], 1 << 20)
    if proxy.refused:  # a row of its own; the install goes on without what was refused
        fail(
            "install",
            "InstallNetworkRefused",
            f"repository {spec.name!r}: the install tried to reach "
            f"{', '.join(sorted(set(proxy.refused))[:10])}; only the package index "
            f"({', '.join(sorted(f'{host}:{port}' for host, port in proxy.allowed))}) is reachable "
            f"(refused); set TRACEGEN_INDEX_HOSTS if that host serves the index's files",
        )
    if report is not None and report.get("ok") is True:
        counter.n_out = 1
        return env_dir
    stderr = outcome.stderr_tail.decode("utf-8", "replace") or None
    if outcome.cause is not None and "wall-clock" in outcome.cause:
        counter.drop("InstallTimeout")
        fail(
            "install",
            "InstallTimeout",
            f"repository {spec.name!r}: the install ran past install_timeout_s="
            f"{spec.install_timeout_s:g}; raise it in the manifest or slim `install`",
            stderr,
        )
        return None
    step = failed_step(report)
    if step is None:
        counter.drop("InstallFailed")
        fail(
            "install",
            "InstallFailed",
            f"repository {spec.name!r}: the install sandbox failed ({outcome.describe()})",
            stderr,
        )
        return None
    counter.drop("InstallFailed")
    output = str(step.get("output", ""))
    fail(
        "install",
        "InstallFailed",
        f"repository {spec.name!r}: install step `{str(step.get('command'))[:300]}` "
        f"exited with {step.get('returncode')}: {last_lines(output, 4)}; fix the "
        f"repository's requirements or set `install` in the manifest",
        output[-4000:],
    )
    return None


def failed_step(report) -> dict | None:
    if not isinstance(report, dict) or not isinstance(report.get("steps"), list):
        return None
    failed = [step for step in report["steps"] if isinstance(step, dict) and step.get("returncode") != 0]
    return failed[-1] if failed else None
