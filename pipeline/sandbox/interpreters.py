"""Which Python runs inside a sandbox: `--python` resolved to an interpreter on this machine.

A spec is a path (`/usr/bin/python3.12`, `~/.pyenv/versions/3.12.1/bin/python`), a version (`3.12`, `3.13.0`:
the newest matching one pyenv has, `pyenv versions`), or a command on PATH (`python3.12`). What is resolved is
the real path of the executable; `describe` asks the interpreter itself for its version and the prefix
(`sys.base_prefix`) a sandbox must make visible for it to start (`pipeline.sandbox.bwrap.interpreter_binds`).
The tracers (`tracers/`, standard library only) need CPython 3.11 or later; the sys.monitoring backend 3.12.
"""

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from pipeline.engine.errors import SetupError

MIN_VERSION = (3, 11)
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")
_PROBE = (
    "import json, sys; "
    "print(json.dumps([sys.executable, sys.base_prefix, list(sys.version_info[:3]), sys.implementation.name]))"
)


@dataclass(frozen=True)
class Interpreter:
    """One interpreter on this machine: its executable (real path), install prefix and version."""

    path: str
    prefix: str
    version: tuple[int, int, int]
    implementation: str

    @property
    def has_monitoring(self) -> bool:
        return self.implementation == "cpython" and self.version >= (3, 12)


def pyenv_root() -> str | None:
    """pyenv's root: `pyenv root` when pyenv is on PATH, else $PYENV_ROOT or ~/.pyenv if it exists."""
    if shutil.which("pyenv"):
        try:
            done = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30, check=True)
            if done.stdout.strip():
                return done.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    for root in (os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv")):
        if root and os.path.isdir(os.path.join(root, "versions")):
            return root
    return None


def pyenv_versions() -> list[str]:
    """The CPython versions pyenv has installed (`X.Y.Z` names under its versions/), oldest first."""
    root = pyenv_root()
    if root is None:
        return []
    names = [name for name in os.listdir(os.path.join(root, "versions")) if re.fullmatch(r"\d+\.\d+\.\d+", name)]
    return sorted(names, key=lambda name: tuple(int(part) for part in name.split(".")))


def pyenv_python(version: str) -> str | None:
    """The executable of the newest pyenv version matching `version` (`3.12` matches 3.12.*), or None."""
    root = pyenv_root()
    matching = [name for name in pyenv_versions() if name == version or name.startswith(version + ".")]
    if root is None or not matching:
        return None
    best = matching[-1]
    major_minor = ".".join(best.split(".")[:2])
    for name in (f"python{major_minor}", "python3", "python"):
        path = os.path.join(root, "versions", best, "bin", name)
        if os.access(path, os.X_OK):
            return path
    return None


def resolve_python(spec: str) -> str:
    """The real path of the interpreter `spec` names; a SetupError naming the fix when there is none."""
    spec = spec.strip()
    if not spec:
        raise SetupError("--python is empty: give a path, a version (3.12) or a command (python3.12)")
    if "/" in spec or spec.startswith("~"):
        path = os.path.expanduser(spec)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SetupError(f"--python {spec!r}: no executable file there")
    elif _VERSION.match(spec):
        path = pyenv_python(spec)
        if path is None:
            have = ", ".join(pyenv_versions()) or "none"
            raise SetupError(
                f"--python {spec}: pyenv has no matching version (installed: {have}); install it "
                f"(pyenv install {spec}) or give the interpreter's path"
            )
    else:
        path = shutil.which(spec)
        if path is None:
            raise SetupError(f"--python {spec!r}: not a path, a version, or a command on PATH")
    interpreter = describe(os.path.realpath(path))
    if interpreter.version[:2] < MIN_VERSION:
        raise SetupError(
            f"--python {spec!r} is Python {'.'.join(map(str, interpreter.version))}: the tracers need "
            f"{'.'.join(map(str, MIN_VERSION))} or later"
        )
    return interpreter.path


@functools.cache
def describe(path: str) -> Interpreter:
    """Ask the interpreter at `path` (isolated mode, nothing of this process's environment) what it is."""
    try:
        done = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
        executable, prefix, version, implementation = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as error:
        raise SetupError(f"the interpreter {path!r} does not run here ({error})") from error
    return Interpreter(os.path.realpath(executable or path), os.path.realpath(prefix), tuple(version), implementation)
