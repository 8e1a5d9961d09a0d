"""Sandbox entry point for repositories: `python -m tracers.runners.repos install|trace REQUEST`.

`install` is `tracers.install.step.install`. `trace` (network off, run by the venv's Python) is the
supervisor of `tracers.guard.watchdog`: it runs `pytest REQUEST FD` as its child and ends the run when a test
overruns its budget. `pytest` runs pytest with `tracers.suite.pytest_plugin` (progress lines to FD), skips the
request's `deselect` node ids (tests an earlier run already ran), traces with the request's
`tracer_backend` (`auto`: sys.monitoring where the venv's Python has it, tracers/suite/entry_monitoring.py; else
settrace), with its cwd and rootdir the request's `worktree` (the run's own writable copy of the installed
tree, `<repo>` in rendered values), and writes the stream to
`SCRATCH/out/trace.jsonl`; pytest's own output goes to `SCRATCH/out/pytest.log`. The run is guarded
from inside by `tracers.guard.audit` as well. Standard library only.
"""

import json
import os
import signal
import sys

from tracers.guard.audit import ABORT_GRACE_S, Guard, TestAborted
from tracers.guard.seal import sealed
from tracers.guard.watchdog import supervise
from tracers.install.step import install
from tracers.reprs.saferepr import Limits
from tracers.suite.entry_monitoring import MonitoringEntryTracer
from tracers.suite.entry_tracer import EntryTracer
from tracers.suite.pytest_plugin import Sink, TracePlugin, header
from tracers.suite.repo_code import PathFilter
from tracers.trace.backends import MONITORING, resolve_backend
from tracers.trace.monitoring_tools import add_refusal_listener

WATCHDOG_MARGIN_S = 1.0
OUTPUT_RESERVE_SHARE = 8  # 1/8 of the output budget is kept for test boundaries and entries (Sink)


def _pytest_args(request):
    """The request's test arguments, then ours, which come after the repository's `addopts` and so win:
    collection errors never stop the run and no failure count does (`--maxfail=0`, after a `-x`, `--exitfirst`
    or `--maxfail=N` of the repository's; 0 is no limit); pytest's cache is the scratch directory's, empty
    each run, so `--lf`, `--ff`, `--nf` and `--sw` are known options (a disabled cache provider would make them
    usage errors) and `--lf` runs everything. `TracePlugin.pytest_configure` turns stepwise and the debugger
    off."""
    import importlib.util

    args = list(request.get("test_args") or [])
    args += ["-s", "-q", "--continue-on-collection-errors", "--maxfail=0", "--rootdir", request["worktree"]]
    args += ["-o", "cache_dir=" + os.path.join(request["scratch"], "pytest-cache")]
    if importlib.util.find_spec("pytest_cov") is not None:
        args.append("--no-cov")
    if importlib.util.find_spec("xdist") is not None:
        args += ["-n", "0"]
    return args


def trace(request, progress_fd):
    os.set_inheritable(progress_fd, False)  # the suite's own subprocesses do not get the watchdog's pipe
    scratch = request["scratch"]
    out_dir = os.path.join(scratch, "out")
    for name in ("out", "tmp", "home"):
        os.makedirs(os.path.join(scratch, name), exist_ok=True)
    null = os.open(os.devnull, os.O_RDWR)
    log_fd = os.open(os.path.join(out_dir, "pytest.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the file size limit fails, not kills
    handle = open(os.path.join(out_dir, "trace.jsonl"), "w", encoding="ascii", buffering=1 << 20)
    budgets = request.get("budgets") or {}
    budget = int(budgets.get("max_output_bytes", 192 << 20))
    sink = Sink(handle, budget - budget // OUTPUT_RESERVE_SHARE - 4096, budget // OUTPUT_RESERVE_SHARE)
    backend = resolve_backend(request.get("tracer_backend"))  # the venv's interpreter decides `auto`
    header(sink, budgets, backend)
    sink.flush()
    roots = [request["worktree"]]
    replacements = [(request["worktree"], "<repo>"), (scratch, "<scratch>")]
    replacements += [(request["venv"], "<venv>")] if request.get("venv") else []
    traced = not request.get("untraced")  # untraced: the tracer is never started, and claims no sys.monitoring tool
    tracer = (MonitoringEntryTracer if backend == MONITORING and traced else EntryTracer)(
        sink,
        PathFilter(roots, request["include"], request["exclude"]),
        budgets,
        Limits(**(request.get("limits") or {})),
        replacements,
        abort_types=(TestAborted,),
    )
    guard = Guard(sink, tracer, request, log_fd)
    add_refusal_listener(
        lambda name, tool: guard.violation(
            "tracer_patched", "the suite called sys.monitoring.%s on the tracer's tool %d (refused)" % (name, tool)
        )
    )
    plugin = TracePlugin(
        tracer,
        sink,
        guard,
        trace=traced,
        progress_fd=progress_fd,
        deselect=request.get("deselect") or (),
        wall_s=request.get("wall_s"),
    )
    real_fork = os.fork
    os.register_at_fork(after_in_child=lambda: guard.after_fork_child(null, handle.fileno()))
    exitstatus, reason = None, None
    try:
        import pytest

        args = _pytest_args(request)
        os.chdir(request["worktree"])
        guard.install(real_fork)
        exitstatus = int(pytest.main(args, plugins=[plugin]))
    except BaseException as error:  # pytest itself failed to start or crashed
        reason = "%s: %s" % (type(error).__name__, str(error)[:1000])
    finally:
        plugin.finish(exitstatus if exitstatus is not None else -1, reason)
        handle.flush()
        os._exit(0)


def main(argv):
    if argv[:1] == ["pytest"] and len(argv) == 3:
        with open(argv[1], encoding="utf-8") as handle:
            trace(json.load(handle), int(argv[2]))
        return
    mode, request_path = argv
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    if mode == "install":
        install(request)
    elif mode == "trace":
        budget_s = float(request["test_timeout_s"]) + ABORT_GRACE_S + WATCHDOG_MARGIN_S
        command = [sys.executable, "-s", "-B", "-m", "tracers.runners.repos", "pytest", request_path]
        sys.exit(supervise(command, budget_s))
    else:
        raise SystemExit("usage: python -m tracers.runners.repos install|trace REQUEST")


if __name__ == "__main__":
    sealed(globals())["main"](sys.argv[1:])  # a suite's patches of modules and builtins reach none of it
