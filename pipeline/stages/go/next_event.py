"""Stage: a Go program's runs → empirical next-event distributions (the `go_next_event` table).

Pure functions over `go_runs` rows of one program; no I/O, no Ray. The three prefix keys, `n`,
censoring and `End` are defined in schemas/go_next_event.py; in short:

- global depth k: what each run did as its event k;
- per-goroutine depth k: what goroutine g did as *its* event k (runs where g appears);
- exact prefix: among runs whose first k events are identical, what came next (rows only for prefixes
  shared by at least `min_prefix_runs` runs).

A run counts at depth k when its event k is known (→ that event's type) or when it is `complete` and
has exactly k events (→ `End`); an incomplete run (timeout, truncated, lost trace) is censored after
its last known event. Guarantees: every emitted row has n >= 1, counts sum to n, `runs` lists exactly
the counted runs, probabilities are counts / n, and rows come in a deterministic order (global by
depth; goroutine by id then depth; exact by depth then smallest run index). Identical runs give
entropy 0 everywhere.
"""

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence

from pipeline.engine.stats import StageCounters, StageOutput
from schemas.go_next_event import END, EVENT_TYPES, OUTCOMES

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


def entropy_bits(counts: Iterable[int]) -> float:
    counts = [c for c in counts if c > 0]
    total = sum(counts)
    value = -sum(c / total * math.log2(c / total) for c in counts) if total else 0.0
    return value if value > 0 else 0.0  # never -0.0


def distribution_row(
    program_id: str,
    kind: str,
    depth: int,
    observed: Sequence[tuple[int, Outcome]],
    *,
    goroutine: int | None = None,
    gpath: str | None = None,
    prefix_hash: str | None = None,
) -> dict:
    """One go_next_event row from (run_index, outcome) pairs."""
    types = Counter(outcome[0] for _, outcome in observed)
    details = Counter(outcome[1] for _, outcome in observed)
    n = len(observed)
    return {
        "program_id": program_id,
        "prefix_kind": kind,
        "depth": depth,
        "goroutine": goroutine,
        "gpath": gpath,
        "prefix_hash": prefix_hash,
        "n": n,
        "runs": sorted(run for run, _ in observed),
        "counts": {name: types.get(name, 0) for name in OUTCOMES},
        "probs": {name: types.get(name, 0) / n for name in OUTCOMES},
        "detail_counts": sorted(details.items()),
        "entropy": entropy_bits(types.values()),
    }


def _observed(runs: Sequence[dict], sequences: Sequence[list], depth: int) -> list[tuple[int, Outcome]]:
    """Each run's outcome at `depth` of its sequence, skipping runs censored (or absent) there."""
    observed = []
    for run, events in zip(runs, sequences, strict=True):
        if depth < len(events):
            observed.append((run["run_index"], outcome_of(events[depth])))
        elif depth == len(events) and run["complete"]:
            observed.append((run["run_index"], END_OUTCOME))
    return observed


def global_rows(program_id: str, runs: Sequence[dict]) -> list[dict]:
    """Rows of the global key, depth 0 .. the longest run (End included)."""
    sequences = [run["events"] for run in runs]
    rows = []
    for depth in range(max((len(s) for s in sequences), default=-1) + 1):
        observed = _observed(runs, sequences, depth)
        if observed:
            rows.append(distribution_row(program_id, "global", depth, observed))
    return rows


def goroutine_rows(program_id: str, runs: Sequence[dict]) -> list[dict]:
    """Rows of the per-goroutine key: for each goroutine, the depths of its own event sequence."""
    ids: dict[str, int] = {}
    per_run: list[dict[str, list[dict]]] = []
    for run in runs:
        split: dict[str, list[dict]] = {}
        for event in run["events"]:
            ids.setdefault(event["gpath"], event["goroutine"])
            split.setdefault(event["gpath"], []).append(event)
        per_run.append(split)
    rows = []
    for gpath, goroutine in sorted(ids.items(), key=lambda item: item[1]):
        present = [(run, split[gpath]) for run, split in zip(runs, per_run, strict=True) if gpath in split]
        members = [run for run, _ in present]
        sequences = [events for _, events in present]
        for depth in range(max(len(s) for s in sequences) + 1):
            observed = _observed(members, sequences, depth)
            if observed:
                rows.append(
                    distribution_row(program_id, "goroutine", depth, observed, goroutine=goroutine, gpath=gpath)
                )
    return rows


def exact_prefix_rows(program_id: str, runs: Sequence[dict], min_prefix_runs: int = 2) -> list[dict]:
    """Rows of the exact-prefix key: a trie over the runs' event tokens, one row per node shared by at
    least `min_prefix_runs` counted runs."""
    if min_prefix_runs < 1:
        raise ValueError(f"min_prefix_runs must be >= 1, got {min_prefix_runs}")
    rows = []
    groups = [(ROOT_HASH, list(runs))]  # runs sharing the prefix of the current depth
    depth = 0
    while groups:
        following = []
        for digest, members in groups:
            observed = _observed(members, [m["events"] for m in members], depth)
            if len(observed) >= min_prefix_runs:
                rows.append(distribution_row(program_id, "exact", depth, observed, prefix_hash=digest.hex()))
            children: dict[tuple, list[dict]] = {}
            for member in members:
                if depth < len(member["events"]):
                    children.setdefault(token(member["events"][depth]), []).append(member)
            for child in children.values():
                if len(child) >= min_prefix_runs:
                    following.append((next_hash(digest, child[0]["events"][depth]), child))
        groups = sorted(following, key=lambda group: group[1][0]["run_index"])
        depth += 1
    return rows


def next_event_rows(program_id: str, run_rows: Sequence[dict], min_prefix_runs: int = 2) -> StageOutput:
    """All `go_next_event` rows of one program from its go_runs rows (build_error rows are ignored), and
    the stage's counters."""
    counters = StageCounters("go_next_event")
    with counters.timed():
        runs = sorted((row for row in run_rows if row["run_index"] >= 0), key=lambda row: row["run_index"])
        counters.n_in = len(runs)
        skipped = len(run_rows) - len(runs)
        if skipped:
            counters.drop("build_error", skipped)
        rows = (
            global_rows(program_id, runs)
            + goroutine_rows(program_id, runs)
            + exact_prefix_rows(program_id, runs, min_prefix_runs)
        )
        counters.n_out = len(rows)
    return StageOutput({"go_next_event": rows}, {"go_next_event": counters})
