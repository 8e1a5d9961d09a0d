"""Ray orchestration, in one place: one remote task per unit, results gathered as they finish.

With no address an embedded local Ray is started (the laptop case); with an address (or inside
`ray job submit`, where RAY_ADDRESS is set) the job joins that cluster. A unit's task asks Ray for its
memory (`memory=`, pipeline/engine/memory.py) and runs under a `MemoryWatch`; `run_units` resubmits a unit
whose worker died (at most MAX_RETRIES times) or that was stopped for memory (at most `oom_retries` times),
then records it failed. Because a unit writes deterministic shard names and a completion record last, a
retried task overwrites its own files and never adds rows.
"""

import contextlib
import functools
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import cast

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.errors import SetupError
from pipeline.engine.executor import Unit
from pipeline.engine.memory import MB, OOM_RETRIES, MemoryLimitExceeded, UnitMemory, advice, call_within_memory
from pipeline.engine.progress import Progress

MAX_RETRIES = 3  # resubmissions of a unit whose worker died (not for memory)
PROGRESS_WAIT_S = 5.0  # how long the driver waits for a unit before it looks whether a progress line is due
DEFAULT_MEMORY = UnitMemory()
START_TIMEOUT_S = 120  # how long a local Ray's start is waited for, tries included (`_start_embedded`)
JOIN_TRIES = 3  # Ray's tries to reach a cluster's GCS, ~40 s each when nothing answers (Ray's own default: 20)
GCS_WAIT = "RAY_gcs_server_port_wait_time_s"  # Ray's wait (s) for a GCS it starts, and its tries to reach one
QUIET_LOGGERS = (  # Ray Train's loggers whose warnings workers drop (`setup_worker`)
    "ray.train.v2._internal.execution.controller.placement_group_cleaner",
    "ray.train.v2._internal.execution.scaling_policy.autoscaling_coordinator_client",
)
NOTES = "tracegen-memory"  # Ray's internal KV namespace of the notes a worker ended for memory leaves


def start_ray(address: str | None, workers: int | None) -> None:
    """Join the cluster at `address` (or RAY_ADDRESS): the only way a job uses a Ray it did not start. Without
    one, start an embedded local Ray limited to `workers` CPUs that is this process's own (`_start_embedded`).
    A start or join that fails is a SetupError of one line, within about START_TIMEOUT_S."""
    import ray

    if ray.is_initialized():
        return
    # Ray retries a task its memory monitor killed without end by default; bounded here for every task
    # (run_units' own tasks run with max_retries=0, which Ray gives no OOM retries, and count them itself).
    os.environ.setdefault("RAY_task_oom_retries", str(OOM_RETRIES))
    address = address or os.environ.get("RAY_ADDRESS")
    runtime_env = {
        "env_vars": {"PYTHONHASHSEED": "0"},
        "worker_process_setup_hook": "pipeline.engine.orchestrate.setup_worker",
    }
    if not address:
        _start_embedded(workers, runtime_env)
        return
    started = time.monotonic()
    try:
        with _ray_setting(GCS_WAIT, str(JOIN_TRIES)):  # when joining, how many times Ray tries the GCS
            ray.init(address=address, logging_level=logging.ERROR, runtime_env=runtime_env)
    except Exception as error:  # noqa: BLE001 (Ray raises ConnectionError, RuntimeError and plain Exception)
        raise SetupError(
            f"cannot join the Ray cluster at {address} (gave up after {time.monotonic() - started:.0f}s: "
            f"{_first_line(error)}); check the address (`ray status` on its head), or leave out --ray-address "
            f"and RAY_ADDRESS for a local Ray"
        ) from error


def _start_embedded(workers: int | None, runtime_env: dict) -> None:
    """A new local Ray of this process's own, never another's: `address="local"` (plain `ray.init()` joins the
    cluster a `ray start` recorded in /tmp/ray/ray_current_cluster); each worker's RAY_ADDRESS names its own
    cluster (`setup_worker`), so Ray's look-ups from inside it (Ray Train's placement-group cleaner asks the
    State API about its controller) never find another instance, nor fail among several; the dashboard address
    it records is a port of its own, unserved (it has no dashboard, and Ray would record 8265, where another
    cluster's dashboard may answer for actors it does not know); Ray Train's preemption watcher, which polls for
    the draining nodes a single local node never has, is off.

    Under load a start can outlast Ray's own waits: the GCS is waited for START_TIMEOUT_S (not Ray's 30 s),
    and a start whose node did not register within Ray's 30 s is ended and tried again while START_TIMEOUT_S
    have not passed."""
    import ray

    keep_token_in_memory()
    env_vars = {**runtime_env["env_vars"], "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}
    started = time.monotonic()
    while True:
        before = _descendants()
        try:
            with _ray_setting(GCS_WAIT, str(START_TIMEOUT_S)):  # when starting, how long Ray waits for the GCS
                ray.init(
                    address="local",
                    num_cpus=workers or os.cpu_count(),
                    include_dashboard=False,
                    dashboard_port=_free_port(),
                    logging_level=logging.ERROR,
                    runtime_env={**runtime_env, "env_vars": env_vars},
                )
            return
        except Exception as error:  # noqa: BLE001 (Ray raises a plain Exception when its node timed out)
            ray.shutdown()
            for pid in _descendants() - before:  # what the failed start left running
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() - started >= START_TIMEOUT_S:
                raise SetupError(
                    f"the local Ray did not start within {START_TIMEOUT_S}s ({_first_line(error)}); the machine "
                    f"is busy: run again, with fewer --workers, or join a running cluster with --ray-address"
                ) from error


@contextlib.contextmanager
def _ray_setting(name: str, value: str):
    """Ray's setting `name` (an environment variable Ray reads as it starts or joins) is `value` within the
    block, unless the user set it."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


def _descendants() -> set[int]:
    """The ids of this process's children, theirs, and so on (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()  # after the command, which may hold spaces
        except (OSError, IndexError):
            continue  # not a process, or one that ended
        parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [os.getpid()]
    while todo:
        children = parents.get(todo.pop(), [])
        found.update(children)
        todo.extend(children)
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:300]


def setup_worker() -> None:
    """Run in every Ray worker as it starts (`worker_process_setup_hook`).

    RAY_ADDRESS names the worker's own cluster, for Ray's look-ups that take no address (the State API of
    Ray Train's placement-group cleaner): without it they pick the cluster a `ray start` recorded, or fail
    with "Found multiple active Ray instances" when another Ray runs on the machine. Two of Ray Train's
    warnings, each with its traceback, are dropped (noise that buries `tracegen pretrain`'s output; their
    errors are kept): the cleaner's, each time it cannot ask the State API whether the training controller is
    alive (the embedded Ray has no dashboard to answer), and the controller's, when its request to the
    autoscaler (there is none locally) is not answered within 5 s on a busy machine."""
    import ray

    os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def keep_token_in_memory() -> None:
    """Token authentication for the embedded Ray, with a fresh token held in this process's environment.

    A new local `ray.init()` turns token auth on and, with no token given, writes one to ~/.ray/auth_token;
    that file then makes a user's later `ray start --head` demand the token from every `ray job submit`.
    A token in RAY_AUTH_TOKEN (inherited by Ray's own processes, never by a sandbox: every backend clears the
    environment) keeps the embedded cluster authenticated and leaves nothing behind. An explicit
    RAY_AUTH_MODE or token of the user's wins.
    """
    if os.environ.get("RAY_AUTH_MODE") is None and not os.environ.get("RAY_AUTH_TOKEN"):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # ray.init() itself turns the mode on


def run_units(
    units: Sequence[Unit],
    work: Callable[[Unit], UnitRecord],
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    memory: UnitMemory | Callable[[Unit], UnitMemory] = DEFAULT_MEMORY,
    oom_retries: int = OOM_RETRIES,
) -> tuple[list[UnitRecord], dict[str, str]]:
    """Run `work` on every unit as Ray tasks, each asking Ray for its unit's `memory` and bounded by it.

    A unit whose worker died is resubmitted at most MAX_RETRIES times; one stopped for memory (past its
    limit, or killed by Ray's memory monitor) at most `oom_retries` times. Returns the completion records in
    unit order, and {unit_id: error} for units that still failed (for memory: the MB reached, the limit and
    what to change): one broken unit never stops the others.
    """
    import ray
    from ray.exceptions import RayError, RayTaskError

    start_ray(address, workers)
    memory_of = memory if callable(memory) else (lambda unit: memory)
    offered = _ray_memory_per_node()
    remote = ray.remote(num_cpus=1, max_retries=0, retry_exceptions=False)(_call_unit)
    work_ref = ray.put(work)
    run = secrets.token_hex(8)
    pending: dict = {}
    stops = {unit.index: 0 for unit in units}
    deaths = {unit.index: 0 for unit in units}
    warned: set[int] = set()

    def submit(unit: Unit) -> None:
        limit = memory_of(unit).mb * MB
        asked = limit
        if offered and limit > offered:
            asked = offered  # a request no node holds would never be scheduled
            if limit not in warned:
                warned.add(limit)
                print(
                    f"tracegen: units ask for {limit // MB} MB (--task-memory-mb) but the largest Ray node offers "
                    f"tasks {offered // MB} MB: each such task asks for {offered // MB} MB (one at a time per "
                    f"node); a unit is still stopped past {limit // MB} MB",
                    file=sys.stderr,
                )
        note = f"{run}/{unit.index}/{stops[unit.index] + deaths[unit.index]}"
        pending[remote.options(memory=asked).remote(work_ref, unit, limit, note)] = (unit, note)

    for unit in units:
        submit(unit)
    records: dict[int, UnitRecord] = {}
    failed: dict[str, str] = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=None if progress is None else PROGRESS_WAIT_S)
        if not done and progress is not None:
            progress.tick(len(records), len(failed), len(units))
        for ref in done:
            unit, note = pending.pop(ref)
            try:
                records[unit.index] = ray.get(ref)
            except RayError as error:
                stopped = _memory_stop(error, unit, memory_of(unit), note)
                if stopped is not None and stops[unit.index] < oom_retries:
                    stops[unit.index] += 1
                    submit(unit)
                    continue
                if stopped is None and not isinstance(error, RayTaskError) and deaths[unit.index] < MAX_RETRIES:
                    deaths[unit.index] += 1
                    submit(unit)
                    continue
                if stopped is not None:
                    attempts = stops[unit.index] + deaths[unit.index] + 1
                    failed[unit.unit_id] = (
                        f"MemoryLimitExceeded: {stopped}; stopped for memory in {stops[unit.index] + 1} of "
                        f"{attempts} attempts (--oom-retries {oom_retries}); {advice(memory_of(unit).smaller)}"
                    )
                else:
                    failed[unit.unit_id] = f"{type(error).__name__}: {_last_line(error)}"
            if progress is not None:
                progress.update(records.get(unit.index), len(records), len(failed), len(units))
    return [records[unit.index] for unit in units if unit.index in records], failed


def _last_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[-1][:500] if lines else ""


def _memory_stop(error: BaseException, unit: Unit, memory: UnitMemory, note: str) -> str | None:
    """What stopped the unit for memory, or None when its task failed otherwise."""
    from ray.exceptions import OutOfMemoryError, RayTaskError

    cause = getattr(error, "cause", None) if isinstance(error, RayTaskError) else None
    if isinstance(cause, MemoryLimitExceeded):
        return str(cause)
    if isinstance(error, OutOfMemoryError):
        return (
            f"unit {unit.unit_id} was killed by Ray's memory monitor: its node ran out of memory "
            f"(its limit: {memory.mb} MB; Ray: {_last_line(error)[:300]})"
        )
    if isinstance(error, RayTaskError):
        return None
    reached = _take_note(note)  # a worker the watch ended (the unit did not stop) left one
    if reached is None:
        return None
    return f"{MemoryLimitExceeded(unit.unit_id, reached, memory.mb * MB)}; its worker was ended (it did not stop)"


def _call_unit(work: Callable[[Unit], UnitRecord], unit: Unit, limit_bytes: int, note: str) -> UnitRecord:
    """The remote function of `run_units`: work(unit) under a MemoryWatch of `limit_bytes`."""
    return call_within_memory(work, unit, limit_bytes, unit.unit_id, on_exit=functools.partial(_leave_note, note))


def _leave_note(note: str, reached_bytes: int) -> None:
    """In a worker about to be ended for memory: tell the driver why (Ray's internal KV, cluster-wide)."""
    from ray.experimental.internal_kv import _internal_kv_initialized, _internal_kv_put

    if _internal_kv_initialized():
        _internal_kv_put(note, json.dumps({"reached": reached_bytes}), namespace=NOTES)


def _take_note(note: str) -> int | None:
    """The memory a worker ended for memory reached, from its note; None when it left none."""
    try:
        from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_get, _internal_kv_initialized

        if not _internal_kv_initialized():
            return None
        text = _internal_kv_get(note, namespace=NOTES)
        if not text:
            return None
        _internal_kv_del(note, namespace=NOTES)
        return int(json.loads(text)["reached"])
    except Exception:  # noqa: BLE001 (an unreadable note: a death like any other)
        return None


def _ray_memory_per_node() -> int:
    """The most memory (bytes) one Ray node offers tasks; 0 when Ray does not say."""
    import ray

    return max(
        (int(node.get("Resources", {}).get("memory", 0)) for node in ray.nodes() if node.get("Alive")), default=0
    )


def map_tasks(fn: Callable, items: Sequence, *, address: str | None = None, workers: int | None = None) -> list:
    """fn(item) for every item as Ray tasks; results in item order."""
    import ray

    start_ray(address, workers)
    remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_call)
    fn_ref = ray.put(fn)
    return ray.get([remote.remote(fn_ref, item) for item in items])


def _call(fn: Callable, item):
    """The one remote function: applies a (pickled once, shared) callable to one item."""
    return fn(item)


class RayTasks:
    """Ray tasks for a stage that wires its own task graph (`pipeline.stages.dedup_distributed.resolve_distributed`):
    `submit` returns object refs, which later submits take as arguments (Ray passes them between workers
    without the driver fetching them); `gather` fetches values."""

    def __init__(self, *, address: str | None = None, workers: int | None = None):
        import ray

        start_ray(address, workers)
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_apply)
        self.parallelism = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def submit(self, fn: Callable, *args, num_returns: int = 1) -> list:
        refs = self._remote.options(num_returns=num_returns).remote(fn, *args)
        return [refs] if num_returns == 1 else list(cast(Sequence, refs))

    def gather(self, handles: list) -> list:
        return self._ray.get(list(handles))

    def wait(self, handles: list) -> None:
        if handles:
            self._ray.wait(list(handles), num_returns=len(handles), fetch_local=False)


def _apply(fn: Callable, *args):
    """The remote function of `RayTasks`: fn(*args), the refs among args already resolved by Ray."""
    return fn(*args)
