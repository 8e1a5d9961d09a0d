"""Ray orchestration, in one place: one remote task per unit, results gathered as they finish.

With no address an embedded local Ray is started (the laptop case); with an address (or inside
`ray job submit`, where RAY_ADDRESS is set) the job joins that cluster. Tasks are retried by Ray
(`max_retries`); because a unit writes deterministic shard names and a completion record last, a
retried task overwrites its own files and never adds rows.
"""

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

MAX_RETRIES = 3


def start_ray(address: str | None, workers: int | None) -> None:
    """Connect to a cluster, or start a local Ray limited to `workers` CPUs."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    runtime_env = {"env_vars": {"PYTHONHASHSEED": "0"}}
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
    progress: "TerminalProgress | None" = None,
) -> tuple[list[UnitRecord], dict[str, str]]:
    """Run `work` on every unit as Ray tasks (retried by Ray when a worker dies).

    Returns the completion records in unit order, and {unit_id: error} for units whose task still failed:
    one broken unit never stops the others.
    """
    import ray
    from ray.exceptions import RayError

    start_ray(address, workers)
    remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_call)
    work_ref = ray.put(work)
    pending = {remote.remote(work_ref, unit): unit for unit in units}
    records: dict[int, UnitRecord] = {}
    failed: dict[str, str] = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            unit = pending.pop(ref)
            try:
                records[unit.index] = ray.get(ref)
            except RayError as error:
                failed[unit.unit_id] = f"{type(error).__name__}: {str(error).strip().splitlines()[-1][:500]}"
            if progress is not None:
                progress.update(records.get(unit.index), len(records), len(failed), len(units))
    return [records[unit.index] for unit in units if unit.index in records], failed


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


class TerminalProgress:
    """One line on stderr: units done/failed/total, rows written, the kind's throughput (e.g. events/s), ETA;
    silent off a terminal."""

    def __init__(self, throughput: Throughput | None = None, stream=sys.stderr):
        self.throughput = throughput
        self.stream = stream
        self.started = time.monotonic()
        self.rows = 0
        self.count = 0

    def update(self, record: UnitRecord | None, done: int, failed: int, total: int) -> None:
        if record is not None:
            self.rows += sum(info.rows for infos in record.shards.values() for info in infos)
            if self.throughput is not None:
                self.count += record.counters.get(self.throughput.stage, {}).get(self.throughput.counter, 0)
        if not self.stream.isatty():
            return
        elapsed = max(time.monotonic() - self.started, 1e-9)
        finished = done + failed
        eta = elapsed / finished * (total - finished)
        rate = f"{self.count / elapsed:,.0f} {self.throughput.label}/s  " if self.throughput else ""
        self.stream.write(
            f"\r  units {done} done, {failed} failed, {total} total  rows {self.rows}  {rate}eta {eta:.0f}s "
        )
        if finished == total:
            self.stream.write("\n")
        self.stream.flush()


class RayTasks:
    """Ray tasks for a stage that wires its own task graph (`pipeline.stages.dedup.resolve_distributed`):
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
