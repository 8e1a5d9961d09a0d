"""Stage: a Go program's runs → windows of consecutive scheduler events, each step with its prefix's empirical
next-event distribution (the `go_trajectories` table, schemas/go_trajectories.py).

Pure functions over `go_runs` rows of one program, beside next_event.py and on its helpers: the same counted
runs (scheduler events only, build_error rows skipped), the same exact-prefix trie (`prefix_groups`, here
with every prefix kept: a prefix one run reached is a step with n = 1), the same outcomes, censoring and
hashes. The trie is walked one depth at a time; at each window start (a multiple of the stride) the runs of
each prefix are split by their next k steps, and each distinct window is one row that collects its steps as
the walk goes deeper. Memory: the program's runs (as next_event holds them), one depth of the trie, and the
open windows (at most k / stride per run).
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.engine.config import Option
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.stages.go.next_event import (
    counted_runs,
    entropy_bits,
    next_hash,
    observed_at,
    prefix_groups,
    token,
)
from schemas.go_next_event import END, OUTCOMES

WINDOW = 16
STRIDE = 16
# The options of a Go kind's window settings (trace-go's and rederive-go's).
WINDOW_OPTION = Option("--go-window", "steps per go_trajectories window")
STRIDE_OPTION = Option("--go-stride", "steps between the starts of a run's consecutive windows")


@dataclass
class _Window:
    """A window being filled: where it starts, the prefix hash there, the runs it came from (positions) and
    how many steps it has (`size`), and its steps so far."""

    depth: int
    prefix: bytes
    members: list[int]
    size: int
    ends: bool
    steps: list[dict] = field(default_factory=list)


def step_row(sequence: Sequence[dict], depth: int, counts: dict[str, int], n: int, entropy: float) -> dict:
    """One step: the sequence's event at `depth` (End past its last event) and its prefix's distribution."""
    if depth < len(sequence):
        event = sequence[depth]
        identity = {k: event[k] for k in ("goroutine", "reason", "function", "file", "line")}
        return {"event": event["event"], **identity, "n": n, "counts": counts, "entropy": entropy}
    blank = {"goroutine": None, "reason": "", "function": "", "file": "", "line": 0}
    return {"event": END, **blank, "n": n, "counts": counts, "entropy": entropy}


def window_row(program_id: str, runs: Sequence[dict], sequences: Sequence[list[dict]], window: _Window) -> dict:
    first = sequences[window.members[0]]
    digest = window.prefix
    for event in first[window.depth : window.depth + window.size - int(window.ends)]:
        digest = next_hash(digest, event)
    return {
        "program_id": program_id,
        "depth": window.depth,
        "prefix_hash": window.prefix.hex(),
        "window_hash": digest.hex(),
        "n_steps": window.size,
        "ends": window.ends,
        "runs": sorted(runs[i]["run_index"] for i in window.members),
        "steps": window.steps,
    }


def trajectory_rows(program_id: str, runs: Sequence[dict], window: int = WINDOW, stride: int = STRIDE) -> list[dict]:
    """The windows of `runs` (counted runs: scheduler events only, by run index), by start depth then smallest
    run index. A run's sequence is its events, then End when it is complete."""
    if type(window) is not int or window < 1 or type(stride) is not int or stride < 1:
        raise ValueError(f"the trajectory window and stride must be ints >= 1, got {window!r} and {stride!r}")
    sequences = [run["events"] for run in runs]
    lengths = [len(events) + int(run["complete"]) for run, events in zip(runs, sequences, strict=True)]
    open_windows: list[_Window] = []
    rows = []
    for depth, groups in prefix_groups(runs, sequences, 1):
        distribution: dict[int, tuple[dict[str, int], int, float]] = {}  # group of a run position at `depth`
        for digest, members in groups:
            observed = observed_at([runs[i] for i in members], [sequences[i] for i in members], depth)
            types = Counter(outcome[0] for _, outcome in observed)
            counted = ({name: types.get(name, 0) for name in OUTCOMES}, len(observed), entropy_bits(types.values()))
            for i in members:
                distribution[i] = counted
            if depth % stride == 0:
                open_windows += _new_windows(depth, digest, members, sequences, lengths, window)
        still_open = []
        for open_window in open_windows:
            i = open_window.members[0]
            open_window.steps.append(step_row(sequences[i], depth, *distribution[i]))
            if len(open_window.steps) == open_window.size:
                rows.append(window_row(program_id, runs, sequences, open_window))
            else:
                still_open.append(open_window)
        open_windows = still_open
    return sorted(rows, key=lambda row: (row["depth"], row["runs"][0]))


def _new_windows(
    depth: int, digest: bytes, members: list[int], sequences: Sequence[list[dict]], lengths: list[int], window: int
) -> list[_Window]:
    """The windows starting at `depth` of the runs sharing one prefix: one per distinct next `window` steps."""
    by_steps: dict[tuple, list[int]] = {}
    for i in members:
        if depth < lengths[i]:
            size = min(window, lengths[i] - depth)
            ends = depth + size > len(sequences[i])
            key = (tuple(token(event) for event in sequences[i][depth : depth + size]), ends)
            by_steps.setdefault(key, []).append(i)
    return [
        _Window(depth, digest, same, min(window, lengths[same[0]] - depth), ends)
        for (_, ends), same in by_steps.items()
    ]


def go_trajectory_rows(
    program_id: str, run_rows: Sequence[dict], window: int = WINDOW, stride: int = STRIDE
) -> StageOutput:
    """All `go_trajectories` rows of one program from its go_runs rows (build_error rows are ignored), and the
    stage's counters."""
    counters = StageCounters("go_trajectories")
    with counters.timed():
        runs = counted_runs(run_rows)
        counters.n_in = len(runs)
        rows = trajectory_rows(program_id, runs, window, stride)
        counters.n_out = len(rows)
    return StageOutput({"go_trajectories": rows}, {"go_trajectories": counters})
