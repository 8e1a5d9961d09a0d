"""The embedded local Ray: authenticated, leaves no token file behind for a later `ray start`, and is each job's
own: jobs side by side on one machine, and beside a `ray start` cluster, never attach to nor disturb another
Ray; only --ray-address joins one."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

SCRIPT = """
import ray
from pipeline.engine.orchestrate import start_ray
start_ray(None, 1)
assert ray.get(ray.remote(lambda: 6 * 7).remote()) == 42
import os
print(os.environ["RAY_AUTH_MODE"])
ray.shutdown()
"""


def test_the_embedded_ray_runs_with_token_auth_and_writes_no_token_file(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "token"
    assert not (tmp_path / ".ray" / "auth_token").exists()


# -- side by side ---------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _env(home: Path, ray_tmpdir: str | None = None) -> dict[str, str]:
    """A user's environment: no RAY_* of the test run's; `ray_tmpdir`: where Ray keeps its sessions and the
    address of the cluster a `ray start` started last (/tmp/ray when None)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    if ray_tmpdir:
        env["RAY_TMPDIR"] = ray_tmpdir
    return env


class Head:
    """A `ray start --head` cluster of one CPU, in a Ray temp dir of its own."""

    def __init__(self, home: Path):
        self.tmpdir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        self.env = _env(home, self.tmpdir)
        self.address_file = Path(self.tmpdir) / "ray" / "ray_current_cluster"
        ports = {flag: _free_port() for flag in ("--port", "--ray-client-server-port", "--dashboard-agent-listen-port")}
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--num-cpus=1"]
            + [f"{flag}={port}" for flag, port in ports.items()]
            + ["--include-dashboard=false", "--disable-usage-stats"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its processes in a group of their own, ended together
        )
        deadline = time.monotonic() + 240
        while not self.address_file.exists():
            assert self.process.poll() is None and time.monotonic() < deadline, "ray start --head did not start"
            time.sleep(1)
        self.address = self.address_file.read_text().strip()
        self.logs = Path(os.path.realpath(Path(self.tmpdir) / "ray" / "session_latest")) / "logs"

    def drove(self, pid: int) -> bool:
        """Whether process `pid` was a driver of this cluster (Ray writes each driver's log beside its own)."""
        return any(path.name.endswith(f"_{pid}.log") for path in self.logs.glob("python-core-driver-*"))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)  # `ray start --block` ends its cluster
        try:
            self.process.wait(timeout=60)
        finally:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shutil.rmtree(self.tmpdir, ignore_errors=True)


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    running = Head(tmp_path_factory.mktemp("home"))
    yield running
    running.stop()


def tracegen(*argv: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", *argv],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def finished(process: subprocess.Popen) -> str:
    """The process's output, once it ended well and said nothing of a traceback or another Ray."""
    output = process.communicate(timeout=900)[0].decode(errors="replace")
    assert process.returncode == 0, output[-4000:]
    for sign in ("Traceback", "multiple active Ray instances"):
        assert sign not in output, output[-4000:]
    return output


def rows(out: Path) -> dict[str, list]:
    """What a functions job wrote: its traces' ids and events, its trajectories' ids and texts, sorted."""
    traces = ds.dataset(out / "traces", format="parquet").to_table(columns=["trace_id", "n_events"]).to_pylist()
    trajectories = ds.dataset(out / "trajectories", format="parquet").to_table(columns=["trajectory_id", "text"])
    return {"traces": sorted(map(str, traces)), "trajectories": sorted(map(str, trajectories.to_pylist()))}


def trace_functions(corpus: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    return tracegen(
        "trace-functions", "--input", str(corpus), "--out", str(out), "--sandbox", "process", "--workers", "1",
        *extra, env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def alone(head, tmp_path_factory):
    """A functions job run alone (its rows, the reference), started where a plain `ray.init()` would join the head,
    and that job's output packed."""
    work = tmp_path_factory.mktemp("alone")
    corpus = work / "functions.jsonl"
    lines = (EXAMPLES / "functions.jsonl").read_text().splitlines()
    good = [line for line in lines if line.strip() and not json.loads(line)["id"].startswith("bad_")]
    corpus.write_text("\n".join(good[:6]) + "\n")
    job = trace_functions(corpus, work / "data", head.env)
    finished(job)
    packing = tracegen(
        "pack", "--data", str(work / "data"), "--out", str(work / "packed"), "--seq-len", "256", "--tokenizer",
        "bytes", "--workers", "1", env=head.env,
    )  # fmt: skip
    finished(packing)
    return {"corpus": corpus, "rows": rows(work / "data"), "packed": work / "packed", "pids": (job.pid, packing.pid)}


def test_jobs_started_where_a_ray_start_cluster_is_recorded_run_on_their_own_ray(head, alone):
    assert alone["rows"]["traces"] and not any(head.drove(pid) for pid in alone["pids"])


def test_two_jobs_side_by_side_each_run_on_its_own_ray_with_the_rows_of_a_run_alone(head, alone, tmp_path):
    """Ray Train (pretrain) beside a functions job, while a third Ray (the head) runs: no job attaches to another's
    Ray, and Ray Train's State API look-ups find their own (else "Found multiple active Ray instances")."""
    env = _env(tmp_path)
    training = tracegen(
        "pretrain", "--data", str(alone["packed"]), "--out", str(tmp_path / "run"), "--steps", "2", "--workers", "1",
        "--global-batch-size", "2", "--warmup-steps", "0", env=env,
    )  # fmt: skip
    job = trace_functions(alone["corpus"], tmp_path / "data", env)
    assert "pretrain: step 2," in finished(training)
    finished(job)
    assert rows(tmp_path / "data") == alone["rows"]
    assert not head.drove(training.pid) and not head.drove(job.pid)


def test_ray_address_joins_the_running_cluster(head, alone, tmp_path):
    job = trace_functions(alone["corpus"], tmp_path / "data", head.env, "--ray-address", head.address)
    finished(job)
    assert head.drove(job.pid)
    assert rows(tmp_path / "data") == alone["rows"]
