"""Ray orchestration, in one place: one remote task per unit, results gathered as they finish.

With no address an embedded local Ray is started (the laptop case); with an address (or inside
`ray job submit`, where RAY_ADDRESS is set) the job joins that cluster. A unit's task asks Ray for its
memory (`memory=`, pipeline/engine/memory.py) and runs under a `MemoryWatch`; `run_units` resubmits a unit
whose worker died (at most MAX_RETRIES times) or that was stopped for memory (at most `oom_retries` times),
then records it failed. Because a unit writes deterministic shard names and a completion record last, a
retried task overwrites its own files and never adds rows.
"""

import functools
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from typing import cast

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.executor import Unit
from pipeline.engine.kind import Throughput
from pipeline.engine.memory import MB, OOM_RETRIES, MemoryLimitExceeded, UnitMemory, advice, call_within_memory

MAX_RETRIES = 3  # resubmissions of a unit whose worker died (not for memory)
PROGRESS_WAIT_S = 5.0  # how long the driver waits for a unit before it looks whether a progress line is due
DEFAULT_MEMORY = UnitMemory()
NOTES = "tracegen-memory"  # Ray's internal KV namespace of the notes a worker ended for memory leaves


def start_ray(address: str | None, workers: int | None) -> None:
    """Connect to a cluster, or start a local Ray limited to `workers` CPUs."""
    import ray

    if ray.is_initialized():
        return
    # Ray retries a task its memory monitor killed without end by default; bounded here for every task
    # (run_units' own tasks run with max_retries=0, which Ray gives no OOM retries, and count them itself).
    os.environ.setdefault("RAY_task_oom_retries", str(OOM_RETRIES))
    address = address or os.environ.get("RAY_ADDRESS")
    runtime_env = {
        "env_vars": {"PYTHONHASHSEED": "0"},
        "worker_process_setup_hook": "pipeline.engine.orchestrate.quiet_worker_logs",
    }
    if address:
        ray.init(address=address, logging_level=logging.ERROR, runtime_env=runtime_env)
    else:
        keep_token_in_memory()
        # "local": always a new embedded Ray. Without it ray.init() joins the cluster a `ray start` on this
        # machine recorded in /tmp/ray, and refuses num_cpus there.
        ray.init(
            address="local",
            num_cpus=workers or os.cpu_count(),
            include_dashboard=False,
            logging_level=logging.ERROR,
            runtime_env=runtime_env,
        )


def quiet_worker_logs() -> None:
    """Run in every Ray worker as it starts (`worker_process_setup_hook`). Ray Train's placement-group cleaner
    asks Ray's State API every few seconds whether the training controller is alive, and without a dashboard
    (the embedded Ray has none) logs a warning each time it cannot: noise that buries `tracegen pretrain`'s
    output. Its warnings are dropped; its errors are kept."""
    logging.getLogger("ray.train.v2._internal.execution.controller.placement_group_cleaner").setLevel(logging.ERROR)


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
    progress: "Progress | None" = None,
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


class Progress:
    """A job's progress on stderr: units done/failed/total, rows written, the kind's throughput (e.g. events/s)
    and the ETA. On a terminal, one live line redrawn as units finish; off one (`ray job logs --follow`, a
    nightly job's log file), a plain line every `interval_s` (`tick` is called while no unit finishes) and one
    when the last unit ends."""

    def __init__(self, throughput: Throughput | None = None, stream=sys.stderr, interval_s: float = 30.0, clock=None):
        self.throughput, self.stream, self.interval_s = throughput, stream, interval_s
        self.clock = clock or time.monotonic
        self.started = self.last = self.clock()
        self.rows = 0
        self.count = 0
        self.live = stream.isatty()

    def update(self, record: UnitRecord | None, done: int, failed: int, total: int) -> None:
        """A unit ended (`record` None: it failed)."""
        if record is not None:
            self.rows += sum(info.rows for infos in record.shards.values() for info in infos)
            if self.throughput is not None:
                self.count += record.counters.get(self.throughput.stage, {}).get(self.throughput.counter, 0)
        self.tick(done, failed, total)

    def tick(self, done: int, failed: int, total: int) -> None:
        """Show the line if it is due: always on a terminal; off one, each `interval_s` and at the end."""
        now = self.clock()
        finished = done + failed == total
        if not self.live and not finished and now - self.last < self.interval_s:
            return
        self.last = now
        elapsed = max(now - self.started, 1e-9)
        eta = f"{elapsed / (done + failed) * (total - done - failed):.0f}s" if done + failed else "-"
        rate = f"{self.count / elapsed:,.0f} {self.throughput.label}/s  " if self.throughput else ""
        line = f"units {done} done, {failed} failed, {total} total  rows {self.rows:,}  {rate}eta {eta}"
        if self.live:
            self.stream.write(f"\r  {line} " + ("\n" if finished else ""))
        else:
            self.stream.write(f"tracegen: {line}  ({elapsed:.0f}s)\n")
        self.stream.flush()


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
