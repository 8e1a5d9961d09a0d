"""The `bwrap` backend (bubblewrap), the local default.

New pid/ipc/uts/net namespaces, a read-only view of the system
directories, a private /tmp (a tmpfs of `file_bytes`: the command's size-capped scratch), only the given
binds, a cleared environment, and, when run as root, a real unprivileged uid for the command (setpriv),
because RLIMIT_NPROC does not bind root: that uid is what makes the process limit stop a fork bomb.
Killing bwrap kills everything in its pid namespace.
"""

import os
import shutil
import sys
import time
from dataclasses import dataclass

from pipeline.engine.errors import SetupError
from pipeline.sandbox.base import Bind, CommandSandbox, SandboxLimits
from pipeline.sandbox.interpreters import describe

SYSTEM_DIRS = ("/usr", "/etc", "/opt")
MERGED_USR_LINKS = ("/bin", "/sbin", "/lib", "/lib64")
UID_BASE = 200_000
UID_SPAN = 100_000
REAP_TIMEOUT_S = 10.0


def sandbox_uid(long_lived: bool = False) -> int:
    """An unprivileged uid per worker process, so concurrent sandboxes do not share a process count; a
    long-lived sandbox (`Sandbox.start`) has its own, so a one-shot command beside it never waits for it."""
    return UID_BASE + long_lived * UID_SPAN + os.getpid() % UID_SPAN


def interpreter_binds(python: str | None = None) -> list[str]:
    """Directories the interpreter (`python`, a real path; None: the host's own) needs when it lives outside
    the system dirs: its install prefix, and its executable's directory when that is elsewhere."""
    if python is None:
        prefix, where = os.path.realpath(sys.base_prefix), os.path.dirname(os.path.realpath(sys.executable))
    else:
        prefix, where = describe(python).prefix, os.path.dirname(python)
    binds: list[str] = []
    for path in (prefix, where):
        if not path.startswith(SYSTEM_DIRS) and not any(path == b or path.startswith(b + "/") for b in binds):
            binds.append(path)
    return binds


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is `uid` (read from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def wait_until_gone(uid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.01)


def traversable_parents(path: str) -> list[str]:
    """bwrap creates missing parents of a mount point as 0700; make them enterable by the sandbox uid."""
    parents = []
    parent = os.path.dirname(os.path.abspath(path))
    while parent not in ("/", ""):
        parents[:0] = ["--perms", "0755", "--dir", parent]
        parent = os.path.dirname(parent)
    return parents


@dataclass
class BwrapSandbox(CommandSandbox):
    name = "bwrap"
    scratch = "/tmp"
    private_network = True  # --unshare-net: a namespace with its own loopback

    def __post_init__(self):
        if shutil.which("bwrap") is None:
            raise SetupError(
                "sandbox 'bwrap' needs bubblewrap: install it (apt-get install bubblewrap, or run "
                "scripts/prereqs.sh) or choose another --sandbox"
            )

    def check(self) -> None:
        """bubblewrap must work, not only be installed: user namespaces may be off, setpriv missing."""
        super().check()
        if os.geteuid() == 0 and shutil.which("setpriv") is None:
            raise SetupError(
                "sandbox 'bwrap' run as root needs setpriv: install util-linux (apt-get install util-linux)"
            )
        result = self.run(["true"], limits=SandboxLimits(wall_s=30.0))
        if not result.ok:
            raise SetupError(
                f"sandbox 'bwrap' cannot create a sandbox here ({result.describe()}); run as root or "
                f"enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
            )

    def uid(self, long_lived: bool) -> int:
        return sandbox_uid(long_lived) if os.geteuid() == 0 else 65534

    def released(self, uid: int) -> None:
        """Return only once every process of the sandbox uid is gone: killing bwrap tears its pid namespace
        down asynchronously, and a process still exiting would count against RLIMIT_NPROC of this worker's
        next sandbox."""
        if os.geteuid() == 0:
            wait_until_gone(uid, REAP_TIMEOUT_S)

    def prepare(self, binds: list[Bind], uid: int) -> None:
        if os.geteuid() == 0:
            for bind in binds:
                if bind.writable:
                    os.chown(bind.path, uid, uid)
                    os.chmod(bind.path, 0o711)  # bwrap enters it before setpriv, without DAC capabilities

    def command(
        self, argv: list[str], binds: list[Bind], env: dict[str, str], cwd: str, limits: SandboxLimits, uid: int
    ) -> list[str]:
        command = [
            "bwrap",
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
            "--clearenv",
            "--unshare-net",
        ]
        for path in SYSTEM_DIRS + tuple(interpreter_binds(self.interpreter)):
            if os.path.isdir(path):
                command += traversable_parents(path) + ["--ro-bind", path, path]
        for link in MERGED_USR_LINKS:
            if os.path.islink(link):
                command += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                command += ["--ro-bind", link, link]
        command += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "1777",
            "--size",
            str(limits.file_bytes),
            "--tmpfs",
            "/tmp",
        ]
        for bind in binds:
            command += traversable_parents(bind.path)
            command += ["--bind" if bind.writable else "--ro-bind", bind.path, bind.path]
        for key, value in {"HOME": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin", **env}.items():
            command += ["--setenv", key, value]
        command += ["--chdir", cwd]
        if os.geteuid() == 0:
            command += [
                "--cap-drop",
                "ALL",
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
                "--cap-add",
                "CAP_SETPCAP",
                "--",
                "setpriv",
                "--reuid",
                str(uid),
                "--regid",
                str(uid),
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
            ]
        else:
            command += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--"]
        return command + argv
