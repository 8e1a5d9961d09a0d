"""A real Ray cluster on loopback, driven only through subprocesses (`ray start`, `ray job submit`).

Nothing here imports Ray: the test process never joins the cluster, so it can share a pytest session with
tests that run an embedded Ray. Every process started here carries a marker in its environment; `stop()`
ends the `ray start --block` processes (which stop what they started) and then SIGKILLs, by pid, whatever
still carries the marker. `ray stop` is never used: it would stop every Ray on the machine.
The cluster has its own Ray temp dir (so `ray.init()` elsewhere cannot find it), its own ports (all
chosen free, none of Ray's defaults), its dashboard (the Job API) on 127.0.0.1 only, and token auth off.
Ray replaces a loopback node address with the machine's own address, so the nodes register under that;
everything stays on this one machine.
"""

import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
RAY = str(VENV_BIN / "ray")
MARK_VAR = "TRACEGEN_TEST_CLUSTER"


def free_ports(count: int) -> list[int]:
    """Ports free right now on 127.0.0.1 (held open together, so they are distinct)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def marked_env(mark: str, ray_tmp: str) -> dict[str, str]:
    """The environment of everything started here: the venv first on PATH (as with an activated venv), no
    inherited RAY_* settings, a private Ray temp dir, and the marker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        {
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "RAY_TMPDIR": ray_tmp,
            "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0",
            MARK_VAR: mark,
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def marked_pids(mark: str) -> list[int]:
    """Live processes whose environment carries the marker (zombies have none)."""
    needle = f"{MARK_VAR}={mark}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def kill_marked(mark: str, timeout: float = 15.0) -> list[int]:
    """SIGKILL every process carrying the marker until none is left; returns the pids killed."""
    killed = []
    deadline = time.monotonic() + timeout
    while (pids := marked_pids(mark)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return killed


def remove_tree(path: str) -> None:
    """Remove a Ray temp dir; again a moment later, for a file a just-killed process still wrote."""
    for _ in range(3):
        shutil.rmtree(path, ignore_errors=True)
        time.sleep(0.5)
        if not os.path.exists(path):
            return


def children(pid: int) -> list[int]:
    """Direct children of a process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def busy_workers(mark: str) -> list[int]:
    """Ray worker processes carrying the marker that are running a unit right now: a sandbox (bwrap) is
    their child. Only Ray workers (`ray::...` processes): a job's driver also runs bwrap, briefly, when its
    preflight checks the sandbox, and killing it would fail the job instead of retrying a unit."""
    return [
        pid
        for pid in marked_pids(mark)
        if (cmdline(pid) or [""])[0].startswith("ray::")
        and any(Path((cmdline(child) or [""])[0]).name == "bwrap" for child in children(pid))
    ]


def run_on_terminal(command: list[str], env: dict, cwd: Path, timeout: float) -> tuple[int, str]:
    """Run `command` with a pseudo-terminal as stdout and stderr; (exit status, everything it wrote)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer is gone
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break  # exited, and nothing more to read (a daemon it left may still hold the terminal)
        else:
            process.kill()
            raise subprocess.TimeoutExpired(command, timeout)
        return process.wait(), b"".join(chunks).decode(errors="replace")
    finally:
        os.close(master)


def http_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class LocalCluster:
    """A head node (no CPUs: it runs the job drivers) and one worker node with `worker_cpus` CPUs."""

    def __init__(self, worker_cpus: int = 2):
        self.worker_cpus = worker_cpus
        self.mark = uuid.uuid4().hex
        # Short: Ray's unix sockets live under it and AF_UNIX paths are limited to ~107 bytes.
        self.tmp = tempfile.mkdtemp(prefix="tgc-", dir="/tmp")
        self.env = marked_env(self.mark, self.tmp)
        self.starters: list[subprocess.Popen] = []
        self.gcs_port, self.dashboard_port, client_port = free_ports(3)
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"
        self._head_ports = [
            "--port",
            str(self.gcs_port),
            "--dashboard-port",
            str(self.dashboard_port),
            "--ray-client-server-port",
            str(client_port),
        ]

    def _node_ports(self) -> list[str]:
        names = [
            "--node-manager-port",
            "--object-manager-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--runtime-env-agent-port",
            "--metrics-export-port",
        ]
        return [arg for name, port in zip(names, free_ports(len(names)), strict=True) for arg in (name, str(port))]

    def _start_node(self, args: list[str], log_name: str) -> None:
        log = open(Path(self.tmp) / log_name, "wb")
        self.starters.append(
            subprocess.Popen(
                [RAY, "start", "--block", "--disable-usage-stats", *args, *self._node_ports()],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.tmp,
                start_new_session=True,
            )
        )

    def start(self, timeout: float = 120.0) -> "LocalCluster":
        self._start_node(
            [
                "--head",
                "--num-cpus",
                "0",
                "--include-dashboard",
                "true",
                "--dashboard-host",
                "127.0.0.1",
                *self._head_ports,
            ],
            "head.log",
        )
        self._wait(lambda: http_json(f"{self.dashboard}/api/version"), timeout, "the head's dashboard")
        self._start_node(["--address", f"127.0.0.1:{self.gcs_port}", "--num-cpus", str(self.worker_cpus)], "worker.log")
        self._wait(
            lambda: (
                len(self.alive_nodes()) == 2 and b"Ray runtime started" in (Path(self.tmp) / "worker.log").read_bytes()
            ),
            timeout,
            "the worker node",
        )
        return self

    def alive_nodes(self) -> list[dict]:
        data = http_json(f"{self.dashboard}/api/v0/nodes?limit=100")
        return [node for node in data["data"]["result"]["result"] if node["state"] == "ALIVE"]

    def _wait(self, probe, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for starter in self.starters:
                if starter.poll() is not None:
                    raise RuntimeError(
                        f"`ray start` exited with {starter.returncode} while waiting for {what}; logs in {self.tmp}"
                    )
            try:
                if probe():
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{what} did not come up within {timeout:.0f}s; logs in {self.tmp}")

    def submit(
        self, script: str, *args: str, no_wait: bool = False, submission_id: str | None = None, timeout: float = 240.0
    ) -> subprocess.CompletedProcess:
        """`ray job submit --working-dir <repo> -- python jobs/<script> ARGS` (waits unless no_wait)."""
        command = [RAY, "job", "submit", "--address", self.dashboard, "--working-dir", str(ROOT)]
        if submission_id:
            command += ["--submission-id", submission_id]
        if no_wait:
            command.append("--no-wait")
        command += ["--", "python", f"jobs/{script}", *args]
        return subprocess.run(command, env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    def jobs(self) -> list[dict]:
        """Every job the cluster has seen: submitted ones and drivers that connected on their own."""
        return http_json(f"{self.dashboard}/api/jobs/")

    def job(self, submission_id: str) -> dict:
        return http_json(f"{self.dashboard}/api/jobs/{submission_id}")

    def wait_job(self, submission_id: str, timeout: float = 240.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.job(submission_id)
            if info["status"] in ("SUCCEEDED", "FAILED", "STOPPED"):
                return info
            time.sleep(0.5)
        raise TimeoutError(f"job {submission_id} did not finish within {timeout:.0f}s")

    def logs(self, submission_id: str) -> str:
        return http_json(f"{self.dashboard}/api/jobs/{submission_id}/logs")["logs"]

    def working_dir_packages(self) -> list[Path]:
        """The working directories Ray unpacked for submitted jobs (on this one machine)."""
        found = Path(self.tmp).glob("ray/session_*/runtime_resources/working_dir_files/_ray_pkg_*")
        return sorted(path for path in found if path.is_dir())

    def busy_workers(self) -> list[int]:
        return busy_workers(self.mark)

    def stop(self) -> None:
        """Stop the `ray start --block` processes, worker node first (each stops its node), then kill any
        straggler by pid."""
        for starter in reversed(self.starters):
            if starter.poll() is None:
                starter.send_signal(signal.SIGTERM)
            try:
                starter.wait(timeout=15)
            except subprocess.TimeoutExpired:
                starter.kill()
                starter.wait()
        kill_marked(self.mark)
