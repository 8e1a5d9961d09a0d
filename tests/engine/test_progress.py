"""Progress is visible where long work runs (a job's units; pretrain's steps, evaluate's cuts): a live line on a
terminal, and off one (`ray job logs --follow`, a nightly job's log file) a plain line at an interval and at the
end."""

import io

from pipeline.engine.dataset import UnitRecord
from pipeline.engine.kind import Throughput
from pipeline.engine.progress import Progress, Steps
from pipeline.writers.parquet import ShardInfo


class Log(io.StringIO):
    def __init__(self, terminal: bool):
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(index: int, rows: int, events: int) -> UnitRecord:
    shards = {"traces": [ShardInfo(f"traces/part-{index:05d}-0000.parquet", rows, 10, "x")]}
    return UnitRecord(index, f"u{index}", "h", shards, {"trace": {"events": events}})


def test_off_a_terminal_a_plain_line_comes_each_interval_and_at_the_end():
    log, clock = Log(terminal=False), Clock()
    progress = Progress(Throughput("trace", "events", "events"), stream=log, interval_s=30, clock=clock)
    clock.now += 10
    progress.update(record(0, 5, 100), 1, 0, 4)  # 10 s in: not due
    clock.now += 15
    progress.tick(1, 0, 4)  # 25 s: not due
    assert log.getvalue() == ""
    clock.now += 10
    progress.tick(1, 0, 4)  # 35 s: due, though no unit ended
    clock.now += 5
    progress.update(None, 1, 1, 4)
    progress.update(record(2, 7, 300), 2, 1, 4)
    clock.now += 5
    progress.update(record(3, 1, 0), 3, 1, 4)  # the last: always shown
    lines = log.getvalue().splitlines()
    assert lines == [
        "tracegen: units 1 done, 0 failed, 4 total  rows 5  3 events/s  eta 105s  (35s)",
        "tracegen: units 3 done, 1 failed, 4 total  rows 13  9 events/s  eta 0s  (45s)",
    ]


def test_on_a_terminal_the_line_is_redrawn_as_units_end():
    log, clock = Log(terminal=True), Clock()
    progress = Progress(stream=log, clock=clock)
    clock.now += 2
    progress.update(record(0, 5, 0), 1, 0, 2)
    progress.update(record(1, 5, 0), 2, 0, 2)
    assert log.getvalue() == (
        "\r  units 1 done, 0 failed, 2 total  rows 5  eta 2s \r  units 2 done, 0 failed, 2 total  rows 10  eta 0s \n"
    )


def test_the_driver_logs_progress_while_a_long_unit_runs(ray_local):
    from pipeline.engine.executor import Unit
    from pipeline.engine.orchestrate import run_units

    def slow_unit(unit):  # defined here: Ray ships it by value (a test module is not importable in a worker)
        import time

        time.sleep(7)
        return UnitRecord(unit.index, unit.unit_id, "h", {}, {})

    log = Log(terminal=False)
    records, failed = run_units([Unit(0, "u0", None)], slow_unit, progress=Progress(stream=log, interval_s=1))
    assert len(records) == 1 and not failed
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("tracegen: units 0 done, 0 failed, 1 total") and "eta -" in lines[0]
    assert lines[-1].startswith("tracegen: units 1 done, 0 failed, 1 total")


def test_steps_off_a_terminal_show_the_count_rate_eta_and_note_each_interval_and_at_the_total():
    log, clock = Log(terminal=False), Clock()
    steps = Steps("pretrain: step", 10, start=4, stream=log, interval_s=30, clock=clock)
    clock.now += 20
    steps.advance(note="loss 2.5")  # 20 s: not due
    clock.now += 20
    steps.advance(note="loss 2.4")  # 40 s: due
    clock.now += 40
    steps.advance(4, note="loss 1.9")  # the total: always shown
    steps.finish()  # shown already: nothing more
    assert log.getvalue().splitlines() == [
        "tracegen: pretrain: step 6 of 10  0.05/s  eta 80s  loss 2.4  (40s)",
        "tracegen: pretrain: step 10 of 10  0.07/s  loss 1.9  (80s)",
    ]


def test_steps_that_end_before_their_total_show_a_last_line_and_an_unknown_total_shows_no_eta():
    log, clock = Log(terminal=True), Clock()
    steps = Steps("evaluate: cuts", None, stream=log, clock=clock)
    clock.now += 2
    steps.advance(3)
    steps.finish("12 trajectories")
    assert log.getvalue() == "\r  evaluate: cuts 3  1.50/s \r  evaluate: cuts 3  1.50/s  12 trajectories \n"
