"""Stage: a Go program's runs → empirical next-event distributions (the `go_next_event` table).

Pure functions over `go_runs` rows of one program; no I/O, no Ray. Only scheduler events count: the
program's user annotations (UserLog, UserRegion) and the harness's object operations (ObjectOp) are skipped
before anything is keyed. The four prefix keys, `n`,
censoring and `End` are defined in schemas/go_next_event.py; in short:

- global depth k: what each run did as its event k;
- per-goroutine depth k: what goroutine g did as *its* event k (runs where g appears);
- goroutine's exact history: among runs where g's own first k events are identical, what g did next,
  with the state those k events left g in (the key that can carry the leak signature);
- exact prefix: among runs whose first k events are identical, what came next (rows only for prefixes
  shared by at least `min_prefix_runs` runs).

A run counts at depth k when its event k is known (→ that event's type) or when it is `complete` and
has exactly k events (→ `End`); an incomplete run (timeout, truncated, lost trace) is censored after
its last known event. Guarantees: every emitted row has n >= 1, counts sum to n, `runs` lists exactly
the counted runs, probabilities are counts / n, `ends` sums to n, and rows come in a deterministic order
(global by depth; goroutine by id then depth; goroutine_exact by id, then depth, then smallest run index;
exact by depth then smallest run index). Identical runs give
entropy 0 everywhere.
"""

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.goscheduler.events import scheduler_events, state_after
from schemas.go_next_event import END, EVENT_TYPES, OUTCOMES, RUN_ENDS

ROOT_HASH = hashlib.sha256(b"").digest()

# An outcome: (event type or End, the detail key 'Event' / 'Event(reason)').
Outcome = tuple[str, str]
END_OUTCOME: Outcome = (END, END)


def outcome_of(event: dict) -> Outcome:
    kind = event["event"]
    if kind not in EVENT_TYPES:
        raise ValueError(f"unknown event type {kind!r}; expected one of {', '.join(EVENT_TYPES)}")
    return kind, f"{kind}({event['reason']})" if event["reason"] else kind


def token(event: dict) -> tuple:
    """What two runs must share for an event to be 'the same' under the exact-prefix key."""
    return (event["goroutine"], event["event"], event["reason"], event["function"], event["file"], event["line"])


def next_hash(previous: bytes, event: dict) -> bytes:
    return hashlib.sha256(previous + json.dumps(list(token(event)), separators=(",", ":")).encode()).digest()


def run_end(run: dict) -> str:
    """How a run ended, as the `ends` column groups go_runs.status."""
    return run["status"] if run["status"] in RUN_ENDS else "other"


def entropy_bits(counts: Iterable[int]) -> float:
    counts = [c for c in counts if c > 0]
    total = sum(counts)
    value = -sum(c / total * math.log2(c / total) for c in counts) if total else 0.0
    return value if value > 0 else 0.0  # never -0.0


def distribution_row(
    program_id: str,
    kind: str,
    depth: int,
    observed: Sequence[tuple[dict, Outcome]],
    *,
    goroutine: int | None = None,
    gpath: str | None = None,
    state: str | None = None,
    prefix_hash: str | None = None,
) -> dict:
    """One go_next_event row from (run, outcome) pairs."""
    types = Counter(outcome[0] for _, outcome in observed)
    details = Counter(outcome[1] for _, outcome in observed)
    ends = Counter(run_end(run) for run, _ in observed)
    n = len(observed)
    return {
        "program_id": program_id,
        "prefix_kind": kind,
        "depth": depth,
        "goroutine": goroutine,
        "gpath": gpath,
        "state": state,
        "prefix_hash": prefix_hash,
        "n": n,
        "runs": sorted(run["run_index"] for run, _ in observed),
        "counts": {name: types.get(name, 0) for name in OUTCOMES},
        "ends": {name: ends.get(name, 0) for name in RUN_ENDS},
        "probs": {name: types.get(name, 0) / n for name in OUTCOMES},
        "detail_counts": sorted(details.items()),
        "entropy": entropy_bits(types.values()),
    }


def observed_at(runs: Sequence[dict], sequences: Sequence[list], depth: int) -> list[tuple[dict, Outcome]]:
    """Each run's outcome at `depth` of its sequence, skipping runs censored (or absent) there."""
    observed = []
    for run, events in zip(runs, sequences, strict=True):
        if depth < len(events):
            observed.append((run, outcome_of(events[depth])))
        elif depth == len(events) and run["complete"]:
            observed.append((run, END_OUTCOME))
    return observed


def global_rows(program_id: str, runs: Sequence[dict]) -> list[dict]:
    """Rows of the global key, depth 0 .. the longest run (End included)."""
    sequences = [run["events"] for run in runs]
    rows = []
    for depth in range(max((len(s) for s in sequences), default=-1) + 1):
        observed = observed_at(runs, sequences, depth)
        if observed:
            rows.append(distribution_row(program_id, "global", depth, observed))
    return rows


def per_goroutine(runs: Sequence[dict]) -> list[tuple[int, str, list[dict], list[list[dict]]]]:
    """For each goroutine, by id: (id, gpath, the runs it appears in, its own events in each of them)."""
    ids: dict[str, int] = {}
    per_run: list[dict[str, list[dict]]] = []
    for run in runs:
        split: dict[str, list[dict]] = {}
        for event in run["events"]:
            ids.setdefault(event["gpath"], event["goroutine"])
            split.setdefault(event["gpath"], []).append(event)
        per_run.append(split)
    goroutines = []
    for gpath, goroutine in sorted(ids.items(), key=lambda item: item[1]):
        present = [(run, split[gpath]) for run, split in zip(runs, per_run, strict=True) if gpath in split]
        goroutines.append((goroutine, gpath, [run for run, _ in present], [events for _, events in present]))
    return goroutines


def goroutine_rows(program_id: str, runs: Sequence[dict]) -> list[dict]:
    """Rows of the per-goroutine key: for each goroutine, the depths of its own event sequence."""
    rows = []
    for goroutine, gpath, members, sequences in per_goroutine(runs):
        for depth in range(max(len(s) for s in sequences) + 1):
            observed = observed_at(members, sequences, depth)
            if observed:
                rows.append(
                    distribution_row(program_id, "goroutine", depth, observed, goroutine=goroutine, gpath=gpath)
                )
    return rows


def prefix_trie_rows(
    program_id: str,
    kind: str,
    runs: Sequence[dict],
    sequences: Sequence[list[dict]],
    min_prefix_runs: int,
    *,
    goroutine: int | None = None,
    gpath: str | None = None,
) -> list[dict]:
    """Rows of an exact-prefix key over `sequences` (one per run): a trie over the event tokens, one row per
    node shared by at least `min_prefix_runs` counted runs. For `goroutine_exact` the sequences are one
    goroutine's own events and each row carries the state its prefix leaves the goroutine in."""
    rows = []
    for depth, groups in prefix_groups(runs, sequences, min_prefix_runs):
        for digest, members in groups:
            observed = observed_at([runs[i] for i in members], [sequences[i] for i in members], depth)
            if len(observed) >= min_prefix_runs:
                state = state_after(sequences[members[0]][:depth]) if kind == "goroutine_exact" else None
                rows.append(
                    distribution_row(
                        program_id,
                        kind,
                        depth,
                        observed,
                        goroutine=goroutine,
                        gpath=gpath,
                        state=state,
                        prefix_hash=digest.hex(),
                    )
                )
    return rows


def prefix_groups(
    runs: Sequence[dict], sequences: Sequence[list[dict]], min_runs: int
) -> Iterator[tuple[int, list[tuple[bytes, list[int]]]]]:
    """Depth by depth from 0, the exact prefixes of `sequences` (one per run) shared by at least `min_runs`
    of them: (depth, [(h_depth, positions of the sequences sharing that prefix)]), each depth's groups by the
    smallest run index among them. A trie walked one level at a time: memory is one level of groups."""
    if min_runs < 1:
        raise ValueError(f"min_prefix_runs must be >= 1, got {min_runs}")
    groups = [(ROOT_HASH, list(range(len(runs))))]
    depth = 0
    while groups:
        yield depth, groups
        following = []
        for digest, members in groups:
            children: dict[tuple, list[int]] = {}
            for i in members:
                if depth < len(sequences[i]):
                    children.setdefault(token(sequences[i][depth]), []).append(i)
            for child in children.values():
                if len(child) >= min_runs:
                    following.append((next_hash(digest, sequences[child[0]][depth]), child))
        groups = sorted(following, key=lambda group: runs[group[1][0]]["run_index"])
        depth += 1


def exact_prefix_rows(program_id: str, runs: Sequence[dict], min_prefix_runs: int = 2) -> list[dict]:
    """Rows of the exact-prefix key over the runs' whole event sequences."""
    return prefix_trie_rows(program_id, "exact", runs, [run["events"] for run in runs], min_prefix_runs)


def goroutine_exact_rows(program_id: str, runs: Sequence[dict], min_prefix_runs: int = 2) -> list[dict]:
    """Rows of the goroutine_exact key: for each goroutine, the exact-prefix trie over its own events."""
    rows = []
    for goroutine, gpath, members, sequences in per_goroutine(runs):
        rows += prefix_trie_rows(
            program_id, "goroutine_exact", members, sequences, min_prefix_runs, goroutine=goroutine, gpath=gpath
        )
    return rows


def counted_runs(run_rows: Sequence[dict]) -> list[dict]:
    """The runs that count (build_error rows do not), by run index, with their scheduler events only."""
    return sorted(
        ({**row, "events": scheduler_events(row["events"])} for row in run_rows if row["run_index"] >= 0),
        key=lambda row: row["run_index"],
    )


def next_event_rows(program_id: str, run_rows: Sequence[dict], min_prefix_runs: int = 2) -> StageOutput:
    """All `go_next_event` rows of one program from its go_runs rows (build_error rows are ignored), and
    the stage's counters."""
    counters = StageCounters("go_next_event")
    with counters.timed():
        runs = counted_runs(run_rows)
        counters.n_in = len(runs)
        skipped = len(run_rows) - len(runs)
        if skipped:
            counters.drop("build_error", skipped)
        rows = (
            global_rows(program_id, runs)
            + goroutine_rows(program_id, runs)
            + goroutine_exact_rows(program_id, runs, min_prefix_runs)
            + exact_prefix_rows(program_id, runs, min_prefix_runs)
        )
        counters.n_out = len(rows)
    return StageOutput({"go_next_event": rows}, {"go_next_event": counters})
