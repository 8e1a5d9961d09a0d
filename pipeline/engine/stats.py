"""Stage counters (docs/architecture.md §5): in, out, dropped by reason, seconds — per stage, mergeable; and what a
stage yields (`StageOutput`)."""

import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field


class StageCounters:
    """Counters of one stage in one unit; `as_dict()` is what completion records and stats hold."""

    def __init__(self, stage: str):
        self.stage = stage
        self.n_in = 0
        self.n_out = 0
        self.dropped = Counter()
        self.seconds = 0.0
        self.events = 0  # trace events produced (tracing stages), for events/s

    @contextmanager
    def timed(self):
        start = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds += time.perf_counter() - start

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] += n

    def as_dict(self) -> dict:
        return {
            "in": self.n_in,
            "out": self.n_out,
            "dropped": dict(sorted(self.dropped.items())),
            "seconds": round(self.seconds, 6),
            "events": self.events,
        }


def merge_counters(per_unit: list[dict]) -> dict:
    """Sum {stage: counters} dicts across units."""
    merged: dict = {}
    for counters in per_unit:
        for stage, values in counters.items():
            into = merged.setdefault(stage, {"in": 0, "out": 0, "dropped": {}, "seconds": 0.0, "events": 0})
            into["in"] += values["in"]
            into["out"] += values["out"]
            into["events"] += values.get("events", 0)
            into["seconds"] = round(into["seconds"] + values["seconds"], 6)
            for reason, n in values["dropped"].items():
                into["dropped"][reason] = into["dropped"].get(reason, 0) + n
    return {stage: merged[stage] for stage in sorted(merged)}


@dataclass
class StageOutput:
    """What a stage (or a whole unit) yields: rows per table, and the counters of the stages that made them.

    Stages are composed with `+`: rows of the same table are concatenated in order, counters are kept
    by stage name (a stage appears once per unit).
    """

    tables: dict[str, list[dict]] = field(default_factory=dict)
    counters: dict[str, StageCounters] = field(default_factory=dict)

    def rows(self, table: str) -> list[dict]:
        return self.tables.get(table, [])

    def __add__(self, other: "StageOutput") -> "StageOutput":
        tables = {name: list(rows) for name, rows in self.tables.items()}
        for name, rows in other.tables.items():
            tables.setdefault(name, []).extend(rows)
        return StageOutput(tables, {**self.counters, **other.counters})

    def counters_dict(self) -> dict[str, dict]:
        """{stage: counters} as completion records and stats hold them."""
        return {name: counter.as_dict() for name, counter in self.counters.items()}
