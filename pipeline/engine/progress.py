"""A job's progress line on stderr (`Progress`), shown by `run_units` (pipeline/engine/orchestrate.py)."""

import sys
import time

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.kind import Throughput


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
