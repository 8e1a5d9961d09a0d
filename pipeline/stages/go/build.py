"""The trusted host side of Go tracing: the toolchain, the harness binary and the warm build cache.

Everything here runs on the host, outside any sandbox, and only ever compiles code we ship (go_harness/
and a few generated warm-up packages), never a user program. Results are cached per machine under a
cache directory (default `~/.cache/tracegen/go`, or `$TRACEGEN_GO_CACHE`), built under a file lock into
a temporary name and renamed into place, so concurrent workers build each thing once:

- `harness-<version>/go_harness`: `go build` of go_harness/ (the version is a hash of its sources). A
  fresh machine needs `golang.org/x/exp` in the module cache; it is fetched with `go mod download` (the
  one step here that may use the network).
- `work/run-*/`: one scratch directory per program being traced, removed when it is done (and by
  `sweep_work` after a day, should a killed worker leave one).
- `gocache-<key>/`: a Go build cache holding the standard library packages programs commonly import
  (`WARM_IMPORTS`), compiled the way the harness compiles a program (same environment, `-trimpath`,
  `-race` or not, main and test binaries). Compiling them costs tens of seconds per machine; every
  program then gets its own *hard-linked* copy (`link_cache`), so its build starts warm, while the
  untrusted build can add entries to its copy but never change the shared files (they are root-owned
  and read-only to the sandbox user) — one program cannot poison another's build. (Not running as
  root, the copy is a real copy: the sandbox user would own the shared inodes.)

`go_env` is the single definition of the Go environment, used for the warm-up here and for the harness
in the sandbox: the cache only hits when the two agree.
"""

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.engine.errors import SetupError

HARNESS_DIR = Path(__file__).resolve().parents[3] / "go_harness"
DEFAULT_CACHE = Path.home() / ".cache" / "tracegen" / "go"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
WARM_FORMAT = "1"
# Standard-library packages compiled into the warm cache (the injected watchdog needs os, runtime,
# runtime/trace, sync and time). A package outside this list still works; it is compiled per program.
WARM_IMPORTS = (
    "bufio",
    "bytes",
    "context",
    "errors",
    "fmt",
    "io",
    "log",
    "math",
    "math/rand",
    "math/rand/v2",
    "net",
    "os",
    "os/signal",
    "runtime",
    "runtime/trace",
    "slices",
    "sort",
    "strconv",
    "strings",
    "sync",
    "sync/atomic",
    "time",
)
TOOL_TIMEOUT_S = 900


class GoSetupError(SetupError):
    """The host cannot build what Go tracing needs (no toolchain, the harness or the warm cache fails)."""


@dataclass(frozen=True)
class Toolchain:
    """The host's Go toolchain, as found once per process."""

    go: str
    goroot: str
    version: str
    modcache: str


def cache_root(cache_dir: str = "") -> Path:
    """Where per-machine Go artefacts live: `cache_dir`, else $TRACEGEN_GO_CACHE, else ~/.cache/tracegen/go."""
    return Path(cache_dir or os.environ.get("TRACEGEN_GO_CACHE") or DEFAULT_CACHE).expanduser().resolve()


@functools.cache
def find_toolchain() -> Toolchain:
    """The `go` command (PATH, $GOROOT/bin, /usr/local/go/bin) and what it reports; ValueError if none."""
    candidates = [shutil.which("go"), os.path.join(os.environ.get("GOROOT", ""), "bin", "go"), "/usr/local/go/bin/go"]
    go = next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
    if go is None:
        raise GoSetupError(
            "Go tracing needs a Go toolchain (>= 1.26): install it (https://go.dev/dl) and put `go` on PATH"
        )
    try:
        out = subprocess.run(
            [go, "env", "GOROOT", "GOVERSION", "GOMODCACHE"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "GOTOOLCHAIN": "local"},
            check=True,
        )
        goroot, version, modcache = out.stdout.split("\n")[:3]
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        raise GoSetupError(f"cannot query the Go toolchain at {go} ({error}); check the installation") from error
    return Toolchain(os.path.realpath(go), os.path.realpath(goroot), version, os.path.realpath(modcache))


def go_env(toolchain: Toolchain, gocache: str, tmp: str) -> dict[str, str]:
    """The environment of every go command that builds a program: offline, local toolchain, no user
    config; `gocache` is the build cache, `tmp` a writable temp and home directory."""
    return {
        "PATH": f"{os.path.dirname(toolchain.go)}:{SYSTEM_PATH}",
        "HOME": tmp,
        "TMPDIR": tmp,
        "GOTMPDIR": tmp,
        "GOCACHE": gocache,
        "GOMODCACHE": toolchain.modcache,
        "GOENV": "off",
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOSUMDB": "off",
        "GOTOOLCHAIN": "local",
        "GOWORK": "off",
        "GOTELEMETRY": "off",
    }


def harness_version(harness_dir: Path = HARNESS_DIR) -> str:
    """Hash of the harness sources (non-test .go files, go.mod, go.sum): it names the binary and the rows."""
    digest = hashlib.sha256()
    names = sorted(
        p.name
        for p in harness_dir.iterdir()
        if (p.suffix == ".go" and not p.name.endswith("_test.go")) or p.name in ("go.mod", "go.sum")
    )
    if not names:
        raise GoSetupError(f"no Go harness sources in {harness_dir}; run from a tracegen checkout")
    for name in names:
        digest.update(name.encode() + b"\0" + (harness_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextmanager
def _locked(root: Path, name: str):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: list[str], cwd: str, env: dict[str, str], what: str) -> None:
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GoSetupError(f"{what} failed: {error}") from error
    if done.returncode != 0:
        raise GoSetupError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout)[-2000:]}")


def ensure_harness(cache_dir: str = "", toolchain: Toolchain | None = None) -> tuple[str, str]:
    """Build go_harness once per machine and version; returns (binary path, harness version)."""
    toolchain = toolchain or find_toolchain()
    version = harness_version()
    root = cache_root(cache_dir)
    final = root / f"harness-{version}" / "go_harness"
    if final.is_file():
        return str(final), version
    with _locked(root, "harness"):
        if final.is_file():
            return str(final), version
        final.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(final.parent, 0o755)
        env = {**os.environ, "GOTOOLCHAIN": "local", "GOWORK": "off", "GOFLAGS": "-mod=readonly"}
        partial = final.parent / f".go_harness-{os.getpid()}"
        build = [toolchain.go, "build", "-trimpath", "-o", str(partial), "."]
        try:
            _run(build, str(HARNESS_DIR), env, "building go_harness")
        except GoSetupError:
            # A fresh machine lacks golang.org/x/exp in its module cache: fetch it (trusted, host side).
            _run(
                [toolchain.go, "mod", "download"],
                str(HARNESS_DIR),
                env,
                "`go mod download` in go_harness/ (fetching golang.org/x/exp; needs the module proxy or a "
                "pre-filled GOMODCACHE)",
            )
            _run(build, str(HARNESS_DIR), env, "building go_harness")
        os.chmod(partial, 0o755)
        os.replace(partial, final)
    return str(final), version


def _warm_sources(imports: tuple[str, ...]) -> dict[str, str]:
    blank = "".join(f'\t_ "{path}"\n' for path in sorted(set(imports)))
    return {
        "main/main.go": f"package main\n\nimport (\n{blank})\n\nfunc main() {{}}\n",
        "test/w.go": f"package w\n\nimport (\n{blank})\n",
        "test/w_test.go": 'package w\n\nimport "testing"\n\nfunc TestW(t *testing.T) {}\n',
    }


def ensure_warm_cache(
    mode: str,
    race: bool,
    imports: tuple[str, ...] = WARM_IMPORTS,
    cache_dir: str = "",
    toolchain: Toolchain | None = None,
) -> str:
    """A trusted Go build cache holding `imports` compiled for `mode` (main|test) with/without -race."""
    if mode not in ("main", "test"):
        raise ValueError(f"mode must be main or test, got {mode!r}")
    toolchain = toolchain or find_toolchain()
    key = hashlib.sha256(
        repr(
            (WARM_FORMAT, toolchain.version, toolchain.goroot, toolchain.modcache, mode, race, sorted(set(imports)))
        ).encode()
    ).hexdigest()[:16]
    root = cache_root(cache_dir)
    final = root / f"gocache-{key}"
    if final.is_dir():
        return str(final)
    with _locked(root, "gocache"):
        if final.is_dir():
            return str(final)
        building = Path(tempfile.mkdtemp(prefix=".gocache-", dir=root))
        try:
            sources = building / "src"
            for name, text in _warm_sources(imports).items():
                (sources / name).parent.mkdir(parents=True, exist_ok=True)
                (sources / name).write_text(text)
                (sources / name).with_name("go.mod").write_text("module prog\n\ngo 1.26\n")
            tmp = building / "tmp"
            tmp.mkdir()
            cache = building / "cache"
            env = go_env(toolchain, str(cache), str(tmp))
            race_flag = ["-race"] if race else []
            if mode == "main":
                argv = [toolchain.go, "build", "-trimpath", "-o", str(tmp / "prog.bin"), *race_flag, "."]
            else:
                argv = [toolchain.go, "test", "-c", "-trimpath", "-o", str(tmp / "prog.test"), *race_flag, "."]
            _run(argv, str(sources / mode), env, f"warming the Go build cache ({mode}, race={race})")
            for directory, _, files in os.walk(cache):
                os.chmod(directory, 0o755)
                for name in files:
                    os.chmod(os.path.join(directory, name), 0o644)
            os.rename(cache, final)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return str(final)


def sweep_work(cache_dir: str = "", max_age_s: float = 24 * 3600) -> int:
    """Remove scratch directories (`work/run-*`) left by killed workers, older than `max_age_s`; returns how
    many. A live one is at most minutes old (the sandbox's wall clock bounds a program)."""
    work = cache_root(cache_dir) / "work"
    removed = 0
    if work.is_dir():
        horizon = time.time() - max_age_s
        for entry in work.iterdir():
            try:
                stale = entry.name.startswith("run-") and entry.stat(follow_symlinks=False).st_mtime < horizon
            except OSError:
                continue
            if stale:
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
    return removed


def link_cache(base: str, destination: str, share: bool | None = None) -> None:
    """A private copy of the build cache `base` at `destination`: directories new and writable by anyone
    (the sandbox user adds entries); files hard-linked when `share` (default: when running as root, so
    the sandbox runs as another uid that cannot write the root-owned shared files), else copied (as a
    non-root user the sandbox user maps to the files' owner and could rewrite a shared inode)."""
    share = os.geteuid() == 0 if share is None else share
    for directory, _, files in os.walk(base):
        relative = os.path.relpath(directory, base)
        target = os.path.normpath(os.path.join(destination, relative))
        os.makedirs(target, exist_ok=True)
        os.chmod(target, 0o777)
        for name in files:
            if relative == "." and name == "trim.txt":
                continue  # rewritten by go's cache trimming; let the copy have its own
            source = os.path.join(directory, name)
            if share:
                os.link(source, os.path.join(target, name))
            else:
                shutil.copyfile(source, os.path.join(target, name))
