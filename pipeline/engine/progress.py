"""Progress lines on stderr for long work: a job's units (`Progress`), and work counted in steps toward a total
(`Steps`: `tracegen pretrain`'s optimizer steps, `evaluate`'s cuts, Go examples and rollouts). On a terminal, one
live line redrawn as the work advances; off one (`ray job logs --follow`, a nightly job's log file, a Ray worker's
output forwarded to the driver), a plain line every `interval_s` and one at the end."""

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.kind import Throughput

INTERVAL_S = 30.0  # off a terminal, the time between two lines
T = TypeVar("T")


class ProgressLine:
    """Where a progress line goes and when: `show` redraws it on a terminal; off one it writes it when
    `interval_s` passed since the last one, and always when it is the `last`."""

    def __init__(self, stream=None, interval_s: float = INTERVAL_S, clock=None):
        self.stream = sys.stderr if stream is None else stream
        self.interval_s = interval_s
        self.clock = clock or time.monotonic
        self.started = self.last = self.clock()
        self.live = self.stream.isatty()

    def elapsed(self) -> float:
        return max(self.clock() - self.started, 1e-9)

    def show(self, text: str, last: bool = False) -> None:
        now = self.clock()
        if not self.live and not last and now - self.last < self.interval_s:
            return
        self.last = now
        if self.live:
            self.stream.write(f"\r  {text} " + ("\n" if last else ""))
        else:
            self.stream.write(f"tracegen: {text}  ({self.elapsed():.0f}s)\n")
        self.stream.flush()


class Progress:
    """A job's progress: units done/failed/total, rows written, the kind's throughput (e.g. events/s) and the
    ETA, shown as units end, and while none does (`tick`, so that a line comes off a terminal every interval)."""

    def __init__(self, throughput: Throughput | None = None, stream=None, interval_s: float = INTERVAL_S, clock=None):
        self.throughput = throughput
        self.line = ProgressLine(stream, interval_s, clock)
        self.rows = 0
        self.count = 0

    def update(self, record: UnitRecord | None, done: int, failed: int, total: int) -> None:
        """A unit ended (`record` None: it failed)."""
        if record is not None:
            self.rows += sum(info.rows for infos in record.shards.values() for info in infos)
            if self.throughput is not None:
                self.count += record.counters.get(self.throughput.stage, {}).get(self.throughput.counter, 0)
        self.tick(done, failed, total)

    def tick(self, done: int, failed: int, total: int) -> None:
        elapsed = self.line.elapsed()
        eta = f"{elapsed / (done + failed) * (total - done - failed):.0f}s" if done + failed else "-"
        rate = f"{self.count / elapsed:,.0f} {self.throughput.label}/s  " if self.throughput else ""
        text = f"units {done} done, {failed} failed, {total} total  rows {self.rows:,}  {rate}eta {eta}"
        self.line.show(text, last=done + failed == total)


class Steps:
    """Work counted in steps: `what` (e.g. "pretrain: step") done of `total` (None: unknown) from `start`, the
    rate of this run's steps, the ETA and a `note` of the latest step (e.g. its loss). `finish` shows the last
    line of work that ends before its total."""

    def __init__(
        self, what: str, total: int | None, *, start: int = 0, stream=None, interval_s: float = INTERVAL_S, clock=None
    ):
        self.what, self.total, self.start, self.done = what, total, start, start
        self.line = ProgressLine(stream, interval_s, clock)
        self.finished = False

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self._show(note, last=self.total is not None and self.done >= self.total)

    def finish(self, note: str = "") -> None:
        if not self.finished:
            self._show(note, last=True)

    def _show(self, note: str, last: bool) -> None:
        self.finished = last
        elapsed, ran = self.line.elapsed(), self.done - self.start
        text = f"{self.what} {self.done:,}" + (f" of {self.total:,}" if self.total is not None else "")
        text += f"  {ran / elapsed:,.2f}/s"
        if self.total is not None and ran and not last:
            text += f"  eta {elapsed / ran * (self.total - self.done):.0f}s"
        self.line.show(text + (f"  {note}" if note else ""), last)


def counted(items: Iterable[T], what: str, total: int | None = None) -> Iterator[T]:
    """`items`, one at a time, each a step of a `Steps` progress line (`total`: their number, when known)."""
    progress = Steps(what, total)
    for item in items:
        yield item
        progress.advance()
    progress.finish()
