"""The jobs on a real Ray cluster (`ray start` + `ray job submit`) and as plain scripts, with faults injected.

One cluster for the module: a head node and one worker node with 2 CPUs, on this machine. Each job
(functions, Go, repositories) is submitted with `--working-dir .`. The uninterrupted run of the function
job is the reference every faulted run is compared with: same row ids per table, no duplicate, nothing
missing, the same shard files, and never a partial file visible through a manifest. Everything runs in
subprocesses; this process never joins a Ray cluster.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import polars as pl
import pytest
from cluster_helpers import MARK_VAR, RAY, ROOT, LocalCluster, kill_marked, marked_env, remove_tree, run_on_terminal
from dataset_checks import assert_same_dataset, check_manifest, manifest_of

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
    pytest.mark.skipif(not os.path.exists(RAY), reason="the ray CLI is not installed in this environment"),
]

# Small budgets; 2 records per unit, so 5 units for the 10 records the corpus keeps.
JOB_ARGS = ["--chunk-size", "2", "--max-seconds", "4", "--record-timeout", "8", "--per-trace", "1"]
UNITS = 5
SLOW_CODE = (
    "def f(n):\n    import time\n    time.sleep(0.8)\n    total = 0\n    for i in range(n):\n"
    "        total += i * i\n    return total\n"
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, example_records) -> str:
    """10 records that trace (each unit holds one that sleeps 0.8 s, so a unit can be caught running),
    a renamed copy of one of them (dropped by dedup) and an unreadable line."""
    examples = {r["id"]: r for r in example_records}
    chosen = [examples[name] for name in ("sort_small", "factorial_rec", "gcd_euclid", "binary_search")]
    slow = [{"id": f"slow_{k}", "code": SLOW_CODE, "input": str(k + 3)} for k in range(6)]
    renamed = dict(
        examples["factorial_rec"],
        id="factorial_renamed",
        code=examples["factorial_rec"]["code"].replace("rest", "below"),
    )
    records = [chosen[0], slow[0], chosen[1], slow[1], renamed, chosen[2], slow[2], chosen[3], *slow[3:]]
    path = tmp_path_factory.mktemp("cluster-corpus") / "functions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "{not json\n")
    return str(path)


@pytest.fixture(scope="module")
def cluster():
    instance = LocalCluster(worker_cpus=2)
    try:
        yield instance.start()
    finally:
        instance.stop()
        remove_tree(instance.tmp)


@pytest.fixture(scope="module")
def reference(cluster, corpus, tmp_path_factory):
    """The uninterrupted run: the function job submitted to the cluster; (out, `ray job submit` result)."""
    out = tmp_path_factory.mktemp("reference") / "out"
    result = cluster.submit("trace_functions.py", "--input", corpus, "--out", str(out), *JOB_ARGS)
    return out, result


def test_the_function_job_runs_when_submitted_to_the_cluster(cluster, reference):
    out, result = reference
    assert result.returncode == 0 and "succeeded" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
    manifest = check_manifest(out)
    assert manifest["units"] == UNITS
    tables = manifest["tables"]
    assert tables["traces"]["rows"] == 10 and tables["duplicates"]["rows"] == 1
    assert tables["failures"]["rows"] == 1 and tables["trajectories"]["rows"] == 20
    stats = json.loads((Path(out) / "stats.json").read_text())
    assert stats["stages"]["dedup"]["dropped"] == {"near_duplicate": 1}
    assert "stages:" in result.stdout and "traces by exit:" in result.stdout  # the printed report
    assert "\r" not in result.stdout  # no progress bar when not on a terminal


def test_the_uploaded_working_directory_is_small(cluster, reference):
    """`--working-dir .` uploads the checkout without the venv, outputs, caches or git objects."""
    packages = cluster.working_dir_packages()
    assert packages, "no unpacked working directory found"
    for package in packages:
        names = {p.name for p in package.iterdir()}
        assert {"pipeline", "jobs", "tracers", "schemas"} <= names
        assert not names & {".venv", "out", ".git", "tracegen.egg-info", ".pytest_cache", ".hypothesis"}
        size = sum(p.stat().st_size for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        assert size < 20 << 20, f"{size / 1e6:.1f} MB uploaded"


def test_a_worker_killed_mid_unit_is_retried_and_the_dataset_equals_an_uninterrupted_run(
    cluster, corpus, reference, tmp_path
):
    out = tmp_path / "killed-worker"
    job = f"kill-worker-{uuid.uuid4().hex[:8]}"
    submitted = cluster.submit(
        "trace_functions.py", "--input", corpus, "--out", f"file://{out}", *JOB_ARGS, no_wait=True, submission_id=job
    )  # an output URI (what pyarrow.fs resolves)
    assert submitted.returncode == 0, submitted.stderr
    killed, deadline = [], time.monotonic() + 180
    while not killed:
        assert time.monotonic() < deadline, "no worker was ever seen running a unit"
        assert cluster.job(job)["status"] in ("PENDING", "RUNNING"), "the job ended before a unit was caught"
        for pid in cluster.busy_workers():  # a worker whose sandbox is tracing a unit's records
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.05)
    assert manifest_of(out) is None
    info = cluster.wait_job(job)
    assert info["status"] == "SUCCEEDED", cluster.logs(job)[-4000:]
    assert_same_dataset(out, reference[0])


def test_a_driver_killed_mid_job_then_run_again_gives_the_uninterrupted_dataset(corpus, reference, tmp_path):
    """Plain `python jobs/trace_functions.py` (an embedded Ray): SIGKILL the driver and its Ray after some
    units finished; a reader finds no manifest; the same command again (on a terminal, so with its progress
    line) skips the finished units and completes the dataset."""
    out = tmp_path / "killed-driver"
    mark = uuid.uuid4().hex
    ray_tmp = tempfile.mkdtemp(prefix="tgd-", dir="/tmp")
    command = [
        sys.executable,
        "jobs/trace_functions.py",
        "--input",
        corpus,
        "--out",
        str(out),
        "--workers",
        "2",
        *JOB_ARGS,
    ]
    env = marked_env(mark, ray_tmp)
    try:
        with open(tmp_path / "driver.log", "wb") as log:
            driver = subprocess.Popen(
                command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            deadline = time.monotonic() + 180
            while not list(out.glob("_units/*.json")):
                assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-4000:]
                assert time.monotonic() < deadline, "no unit finished in time"
                time.sleep(0.05)
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        kill_marked(mark)  # the embedded Ray's own processes, by pid
        assert manifest_of(out) is None, "the job got to its manifest before the kill"
        finished = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.glob("_units/*.json")}
        assert 1 <= len(finished) < UNITS
        shards = {
            s["path"]: (out / s["path"]).stat().st_mtime_ns
            for data, _ in finished.values()
            for infos in json.loads(data)["shards"].values()
            for s in infos
        }

        status, output = run_on_terminal(command, env, ROOT, timeout=300)
        assert status == 0, output[-4000:]
        # on a terminal the driver shows its live line: units done/failed/total, rows, events/s, ETA
        progress = re.findall(
            r"\r  units (\d+) done, (\d+) failed, (\d+) total  rows (\d+)  [\d,]+ events/s  "
            r"eta \d+s",
            output,
        )
        assert progress and progress[-1][:3] == (str(UNITS), "0", str(UNITS)), output[-4000:]
        assert int(progress[-1][3]) == sum(t["rows"] for t in manifest_of(out)["tables"].values())
        # the finished units were skipped: neither their records nor their shards were written again
        assert {
            name: (p.read_bytes(), p.stat().st_mtime_ns)
            for name, p in ((name, out / "_units" / name) for name in finished)
        } == finished
        assert {path: (out / path).stat().st_mtime_ns for path in shards} == shards
        assert_same_dataset(out, reference[0])
    finally:
        kill_marked(mark)
        remove_tree(ray_tmp)


def test_a_plain_run_starts_its_own_ray_even_when_a_cluster_was_started_on_the_machine(cluster, corpus, tmp_path):
    """`ray start` records its address for `ray.init()` to find; a plain `python jobs/...` (no --ray-address,
    no RAY_ADDRESS) must still start an embedded Ray of --workers CPUs, not join that cluster."""
    mark = uuid.uuid4().hex
    env = {**cluster.env, MARK_VAR: mark}  # the cluster's Ray temp dir: its address file is visible
    before = {job["submission_id"] or job["job_id"] for job in cluster.jobs()}
    one_record = tmp_path / "one.jsonl"
    one_record.write_text(Path(corpus).read_text().splitlines()[0] + "\n")
    out = tmp_path / "plain"
    try:
        result = subprocess.run(
            [
                sys.executable,
                "jobs/trace_functions.py",
                "--input",
                str(one_record),
                "--out",
                str(out),
                "--workers",
                "1",
                *JOB_ARGS,
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        kill_marked(mark)
    assert result.returncode == 0, result.stderr[-3000:]
    assert check_manifest(out)["tables"]["traces"]["rows"] == 1
    assert {job["submission_id"] or job["job_id"] for job in cluster.jobs()} == before


@pytest.mark.skipif(
    shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(), reason="the Go toolchain is not installed"
)
def test_the_go_job_runs_when_submitted_to_the_cluster(cluster, tmp_path):
    """One task per program; the harness and its warm cache come from the per-machine cache."""
    programs = tmp_path / "programs"
    for name in ("sequential", "double_lock"):
        shutil.copytree(ROOT / "examples" / "go" / name, programs / name)
    out = tmp_path / "go"
    result = cluster.submit(
        "trace_go.py", "--programs", str(programs), "--runs", "2", "--timeout", "1", "--out", str(out)
    )
    assert result.returncode == 0 and "succeeded" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
    manifest = check_manifest(out)
    assert manifest["units"] == 2
    runs = pl.read_parquet([out / s["path"] for s in manifest["tables"]["go_runs"]["shards"]])
    assert sorted(runs.select("program_id", "run_index", "status").rows()) == [
        ("double_lock", 0, "deadlock"),
        ("double_lock", 1, "deadlock"),
        ("sequential", 0, "ok"),
        ("sequential", 1, "ok"),
    ]


def test_the_repos_job_runs_when_submitted_to_the_cluster(cluster, tmp_path):
    """The bundled example repository (a real git repo), cloned, installed and traced inside the task."""
    built = subprocess.run(
        [str(ROOT / "examples" / "repos" / "build.sh"), str(tmp_path / "repos")],
        capture_output=True,
        text=True,
        check=True,
    )
    out = tmp_path / "repos-out"
    result = cluster.submit(
        "trace_repos.py",
        "--manifest",
        built.stdout.strip(),
        "--out",
        str(out),
        "--per-trace",
        "1",
        "--cache-dir",
        str(tmp_path / "cache"),
        timeout=420,
    )
    assert result.returncode == 0 and "succeeded" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
    manifest = check_manifest(out)
    assert manifest["units"] == 1
    traces = pl.read_parquet([out / s["path"] for s in manifest["tables"]["traces"]["shards"]])
    assert set(traces["source_kind"]) == {"repo"} and traces.height > 0
    assert manifest["tables"]["trajectories"]["rows"] == 2 * traces.height


BAD_MANIFEST = '[[repo]]\nname = "a"\nurl = "/nowhere"\nref = "main"\nmax_events = -5\n'


def test_a_submitted_job_with_bad_input_fails_naming_the_file(cluster, tmp_path):
    """The job fails before any unit runs, and its log names the file, the line and the field. (Other bad
    inputs take the same path through `pipeline.cli.main`, tested in process in tests/cli.)"""
    path = tmp_path / "input"
    path.write_text(BAD_MANIFEST)
    result = cluster.submit("trace_repos.py", "--manifest", str(path), "--out", str(tmp_path / "o"))
    assert result.returncode != 0 and "failed" in result.stdout.lower()
    message = f"{path}: [[repo]] #1 (a): max_events must be a positive int, got -5 (line 5)"
    assert message in result.stdout, result.stdout[-3000:]
    assert not (tmp_path / "o" / "manifest.json").exists()


def nightly(cluster, night: str, *args: str) -> subprocess.CompletedProcess:
    """jobs/submit_nightly.sh against the cluster, as a scheduler would call it."""
    env = dict(cluster.env, TRACEGEN_NIGHT=night, RAY=RAY)
    return subprocess.run(
        [str(ROOT / "jobs" / "submit_nightly.sh"), cluster.dashboard, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_retried_nightly_submission_attaches_to_the_night_s_job_instead_of_running_twice(cluster, tmp_path):
    """docs/scheduling.md's retry rule: the same night submitted twice is one job and one version; a new
    night with nothing new succeeds and publishes nothing; a bad sources file is a failed job (exit 1)."""
    functions, sources, root = tmp_path / "f.jsonl", tmp_path / "sources.toml", tmp_path / "root"
    functions.write_text(
        "".join(
            json.dumps({"id": f"n{i}", "code": f"def f(x):\n    return x * {i + 2}\n", "input": "3"}) + "\n"
            for i in range(3)
        )
    )
    sources.write_text(f'[[functions]]\npath = "{functions}"\n')
    args = ("--sources", str(sources), "--root", str(root), "--sandbox", "process", "--no-report")
    night = f"nightly-test-{uuid.uuid4().hex[:8]}"
    first = nightly(cluster, night, *args)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert "published version 1" in first.stdout and f"{night} succeeded" in first.stdout
    retried = nightly(cluster, night, *args)
    assert retried.returncode == 0, retried.stdout[-3000:] + retried.stderr[-2000:]
    assert "already submitted; following it" in retried.stdout
    assert [job["submission_id"] for job in cluster.jobs()].count(night) == 1
    assert sorted(p.name for p in (root / "_log").glob("*.json")) == [f"{1:020d}.json"]

    quiet = nightly(cluster, f"{night}-next", *args)
    assert quiet.returncode == 0 and "nothing new" in quiet.stdout, quiet.stdout[-3000:]
    sources.write_text(f'[[functions]]\npath = "{functions}"\nglob = "*"\n')
    bad = nightly(cluster, f"{night}-bad", *args)
    assert bad.returncode == 1 and "unknown key 'glob'" in bad.stdout + bad.stderr, bad.stdout[-3000:]
