"""Sandboxes for untrusted code, behind one interface (`Sandbox.run`); pick one with `make_sandbox`."""

from pipeline.sandbox.base import Bind, Sandbox, SandboxLimits, SandboxResult

BACKENDS = ("bwrap", "docker", "process")


def make_sandbox(name: str, limits: SandboxLimits | None = None, python: str | None = None) -> Sandbox:
    """The sandbox backend called `name`, running `python` inside (a resolved path,
    pipeline/sandbox/interpreters.py; None: the backend's own); unknown names are a ValueError listing the
    choices, and docker refuses `python` (it runs its image's)."""
    if name == "bwrap":
        from pipeline.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(limits or SandboxLimits(), python)
    if name == "docker":
        from pipeline.sandbox.docker import DockerSandbox

        return DockerSandbox(limits or SandboxLimits(), python)
    if name == "process":
        from pipeline.sandbox.process import ProcessSandbox

        return ProcessSandbox(limits or SandboxLimits(), python)
    raise ValueError(f"unknown sandbox {name!r}: choose one of {', '.join(BACKENDS)}")


def check_sandbox(name: str, python: str | None = None) -> None:
    """Make sure backend `name` can run here, before a job starts any work: a SetupError names what is
    missing and how to get it (bubblewrap, a Docker engine, the sandbox image)."""
    make_sandbox(name, python=python).check()


__all__ = ["BACKENDS", "Bind", "Sandbox", "SandboxLimits", "SandboxResult", "check_sandbox", "make_sandbox"]
