"""Ray orchestration, in one place: one remote task per unit, results gathered as they finish.

With no address an embedded local Ray is started (the laptop case); with an address (or inside
`ray job submit`, where RAY_ADDRESS is set) the job joins that cluster. Tasks are retried by Ray
(`max_retries`); because a unit writes deterministic shard names and a completion record last, a
retried task overwrites its own files and never adds rows.
"""

import os
import sys
import time
from collections.abc import Callable, Sequence

from pipeline.dataset import UnitRecord
from pipeline.executor import Unit

MAX_RETRIES = 3


def start_ray(address: str | None, workers: int | None) -> None:
    """Connect to a cluster, or start a local Ray limited to `workers` CPUs."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    runtime_env = {"env_vars": {"PYTHONHASHSEED": "0"}}
    if address:
        ray.init(address=address, logging_level="ERROR", runtime_env=runtime_env)
    else:
        ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, logging_level="ERROR",
                 runtime_env=runtime_env)


def run_units(units: Sequence[Unit], work: Callable[[Unit], UnitRecord], *, address: str | None = None,
              workers: int | None = None, progress: Callable[[UnitRecord, int, int], None] | None = None
              ) -> list[UnitRecord]:
    """Run `work` on every unit as Ray tasks; returns the completion records in unit order."""
    import ray

    start_ray(address, workers)
    remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_call)
    work_ref = ray.put(work)
    pending = {remote.remote(work_ref, unit): unit.index for unit in units}
    records: dict[int, UnitRecord] = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            index = pending.pop(ref)
            records[index] = ray.get(ref)
            if progress is not None:
                progress(records[index], len(records), len(units))
    return [records[unit.index] for unit in units]


def _call(work: Callable[[Unit], UnitRecord], unit: Unit) -> UnitRecord:
    return work(unit)


class TerminalProgress:
    """A one-line progress report on stderr (units done/total, rows, rate, ETA); silent off a terminal."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.started = time.monotonic()
        self.rows = 0

    def __call__(self, record: UnitRecord, done: int, total: int) -> None:
        self.rows += sum(info.rows for infos in record.shards.values() for info in infos)
        if not self.stream.isatty():
            return
        elapsed = time.monotonic() - self.started
        eta = elapsed / done * (total - done)
        self.stream.write(f"\r  units {done}/{total}  rows {self.rows}  {elapsed:.0f}s elapsed  "
                          f"eta {eta:.0f}s ")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()
