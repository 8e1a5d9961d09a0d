"""Failure rows (docs/architecture.md §5): every input that fails becomes one, never an exception or a silent drop.

Stages record them through one collector, `Failures` (one per unit). A step that fails returns (or reports) a
`Failure`: the stage, the reason (`error_type`), what went wrong and how to fix it, and any stderr tail. The
collector turns it into the row of the input it is about (`Input`: its source id, where it came from, and the
label that starts every message about it, so each message names its input), and, given the stage's counters,
counts the input as dropped for that reason.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.engine.stats import StageCounters


@dataclass(frozen=True)
class Failure:
    """Why an input failed: the stage, the reason, the message (what went wrong and the fix; the collector puts
    the input's label before it) and the sandboxed process's stderr tail, if any."""

    stage: str
    error_type: str
    message: str
    stderr_tail: str | None = None


@dataclass(frozen=True)
class Input:
    """The input a failure is about: its source id (None: it has none), where it came from (`input_ref`, e.g.
    `examples/functions.jsonl:12`) and the label its messages start with (e.g. `record 'f1'`)."""

    source_id: str | None
    ref: str
    label: str


class Failures:
    """One unit's `failures` rows, in the order they were recorded."""

    def __init__(self, unit_id: str):
        self.unit_id = unit_id
        self.rows: list[dict] = []

    def add(self, about: Input, failure: Failure, counter: StageCounters | None = None) -> None:
        """Record `failure` of the input `about`; with `counter`, also count the input as dropped there for the
        failure's reason."""
        message = f"{about.label}: {failure.message}"
        self.rows.append(
            failure_row(
                self.unit_id,
                about.source_id,
                failure.stage,
                failure.error_type,
                message,
                about.ref,
                failure.stderr_tail,
            )
        )
        if counter is not None:
            counter.drop(failure.error_type)

    def extend(self, about: Input, failures: Iterable[Failure]) -> None:
        """Record each of `failures` of the input `about`, in order (uncounted)."""
        for failure in failures:
            self.add(about, failure)


def failure_row(
    unit_id: str,
    source_id: str | None,
    stage: str,
    error_type: str,
    message: str,
    input_ref: str,
    stderr_tail: str | None = None,
) -> dict:
    """A row of the `failures` table."""
    return {
        "unit_id": unit_id,
        "source_id": source_id,
        "stage": stage,
        "error_type": error_type,
        "message": message,
        "stderr_tail": stderr_tail,
        "input_ref": input_ref,
    }
