"""The weave dialect: a Go dataset as the Go seed's (Weave's) training examples (schemas/weave_export.md).

The seed runs each program N times, cuts every run at fixed prefix fractions (25, 50, 75 % of its events)
and writes, per run and fraction, the prefix and the event that followed (a *point* example); it pools
the runs of a program at the same fraction into one *distribution* example (counts over six event types,
Jeffreys-Dirichlet posterior); and it chains a run's events after a fraction into multi-turn *trajectory*
examples. Those are the records here, built from our tables, in the seed's field names and shapes.

Two views of a run's events:
- program (default): our go_runs events — the program's goroutines only, canonical goroutine ids shared
  by all runs, preemption folds applied — mapped onto the seed's six event types.
- runtime (`runtime_goroutines=True`): the stored raw trace (go_traces) re-read unfiltered by
  `go_harness transitions` and mapped exactly as the seed's parser maps a trace: every goroutine (the
  runtime's too) under the runtime's own ids, raw timestamps, status records updating the state map.
"""

from collections import Counter
from collections.abc import Iterator

from pipeline.goscheduler.events import blocked_on as waits_on
from pipeline.inspect import load_table
from pipeline.stages.go import build as go_build
from pipeline.stages.go.rederive import stored_transitions

OPTIONS = {"runtime_goroutines"}

SPLIT_PERCENTS = (25, 50, 75)
MIN_EVENTS = 4  # the seed skips runs with fewer events: too short to cut
MAX_SEED_EVENTS = 10  # a trajectory's context: the last events of its starting prefix
MIN_STEPS, MAX_STEPS = 3, 5  # a trajectory's turns
TRAJECTORIES = (("A_25to50", 25, 50), ("B_50to75", 50, 75))
EVENT_TYPES = ("GoBlock", "GoCreate", "GoEnd", "GoSched", "GoStart", "GoUnblock")
JEFFREYS_ALPHA = 0.5
UNKNOWN = "unknown"  # what the seed's aggregation writes for metadata a program does not declare
OUTCOMES = {"ok": "success"}  # go_runs.status -> the seed's outcome words; others keep their name
TIMED_OUT = ("deadlock", "timeout")

# Our events in the seed's vocabulary: (event type, status the goroutine is left in, blocked_on).
PROGRAM_EVENTS = {
    "GoCreate": ("GoCreate", "runnable", None),
    "GoStart": ("GoStart", "running", None),
    "GoUnblock": ("GoUnblock", "runnable", None),
    "GoSched": ("GoSched", "runnable", None),
    "GoEnd": ("GoEnd", "dead", None),
}
STATUS_OF_STATE = {"Running": "running", "Syscall": "running", "Runnable": "runnable", "Waiting": "blocked"}


def records(data: str, runtime_goroutines: bool = False) -> Iterator[dict]:
    """Every example of dataset `data`, program by program (sorted by id): point examples (by run, then
    fraction), distribution examples (by fraction), trajectory examples (by run, then type)."""
    programs, runs = load_table(data, "go_programs"), load_table(data, "go_runs")
    if programs is None or runs is None:
        raise ValueError(f"{data!r} holds no go_programs or go_runs rows; export a dataset made by trace-go")
    traces = {}
    if runtime_goroutines:
        stored = load_table(data, "go_traces")
        traces = (
            {(t["program_id"], t["run_index"]): t for t in stored.iter_rows(named=True)} if stored is not None else {}
        )
    harness = go_build.ensure_harness()[0] if runtime_goroutines else ""
    by_program: dict[str, list[dict]] = {}
    for run in runs.sort("program_id", "run_index").iter_rows(named=True):
        if run["run_index"] >= 0:
            by_program.setdefault(run["program_id"], []).append(run)
    for program in programs.sort("program_id").iter_rows(named=True):
        mine = by_program.get(program["program_id"], [])
        views = {run["run_index"]: run_view(run, traces, harness, runtime_goroutines) for run in mine}
        yield from program_records(program, mine, views, "runtime" if runtime_goroutines else "program")


def run_view(run: dict, traces: dict, harness: str, runtime: bool) -> list[dict] | None:
    """The run's events as the seed's snapshots, or None when the run gives no cut points (its events
    are not its whole story, or in the runtime view its raw trace is not stored or does not read whole).
    A timed-out run is never cut (the seed keeps no trace of it), so it is not read."""
    if run["status"] in TIMED_OUT:
        return None
    if runtime:
        trace = traces.get((run["program_id"], run["run_index"]))
        if trace is None:
            return None
        transitions, trailer = stored_transitions(trace, harness)
        return runtime_snapshots(transitions) if not trailer["trace_error"] else None
    return program_snapshots(run["events"]) if run["complete"] else None


def snapshot(index: int, time_ns: int, event_type: str, goroutine: int, states: dict[int, dict]) -> dict:
    """One seed StateSnapshot: the event and every live goroutine's state, keyed by id as text in the
    order the seed's JSON encoder writes map keys (sorted as strings)."""
    return {
        "event_id": index,
        "timestamp_ns": time_ns,
        "event_type": event_type,
        "goroutine_id": goroutine,
        "goroutines": {str(g): states[g] for g in sorted(states, key=str)},
        "channels": {},
        "mutexes": {},
    }


def program_snapshots(events: list[dict]) -> list[dict]:
    """Snapshots from go_runs events (program view): GoSyscall enter is the seed's GoBlock(syscall), exit
    its GoStart; GoTransition and annotations (user logs and regions, object operations) have no seed event
    and are left out; a GoBlock's blocked_on names the object and its state when the run was rewritten
    (goscheduler.events.blocked_on); locals_hint is the event's program frame ('unknown' when it has none)."""
    states: dict[int, dict] = {}
    out = []
    for event in events:
        name, reason = event["event"], event["reason"]
        if name == "GoBlock":
            mapped = ("GoBlock", "blocked", waits_on(event))
        elif name == "GoSyscall":
            mapped = ("GoBlock", "running", "syscall") if reason == "enter" else ("GoStart", "running", None)
        else:
            mapped = PROGRAM_EVENTS.get(name)
        if mapped is None:
            continue
        event_type, status, blocked_on = mapped
        goroutine = event["goroutine"]
        if event_type == "GoEnd":
            states.pop(goroutine, None)
        else:
            states[goroutine] = {
                "status": status,
                "blocked_on": blocked_on,
                "locals_hint": event["function"] or UNKNOWN,
            }
        out.append(snapshot(len(out), event["time_ns"], event_type, goroutine, states))
    return out


def seed_transition(source: str, target: str, reason: str) -> tuple[str | None, str | None]:
    """(event type or None, blocked_on) of a raw transition, as the seed's parser maps it: nothing from
    Undetermined (a status record), syscall entry a GoBlock, syscall exit a GoStart or GoUnblock."""
    if source == "Undetermined":
        return None, None
    pair = (source, target)
    if pair == ("NotExist", "Runnable"):
        return "GoCreate", None
    if pair in (("Runnable", "Running"), ("Syscall", "Running")):
        return "GoStart", None
    if pair == ("Running", "Waiting"):
        return "GoBlock", reason
    if pair == ("Running", "Syscall"):
        return "GoBlock", "syscall"
    if pair in (("Waiting", "Runnable"), ("Syscall", "Runnable")):
        return "GoUnblock", None
    if pair == ("Running", "Runnable"):
        return "GoSched", None
    if target == "NotExist":
        return "GoEnd", None
    return None, None


def runtime_snapshots(transitions: list[dict]) -> list[dict]:
    """Snapshots from a raw trace's transitions (runtime view), as the seed builds them: every transition
    updates the state map (a goroutine that ends leaves it), only mapped ones are events; locals_hint is the
    innermost frame of the event's stack ('unknown' without one), raw ids and raw timestamps."""
    states: dict[int, dict] = {}
    out = []
    for transition in transitions:
        event_type, blocked_on = seed_transition(transition["from"], transition["to"], transition["reason"])
        goroutine = transition["goroutine"]
        if transition["to"] == "NotExist":
            states.pop(goroutine, None)
        else:
            states[goroutine] = {
                "status": STATUS_OF_STATE.get(transition["to"], "dead"),
                "blocked_on": blocked_on,
                "locals_hint": transition["function"] or UNKNOWN,
            }
        if event_type is not None:
            out.append(snapshot(len(out), transition["time_ns"], event_type, goroutine, states))
    return out


def cut(snapshots: list[dict], percent: int) -> int:
    """The prefix length the seed cuts at: percent % of the events, at least 1 and leaving one to predict."""
    return min(max(len(snapshots) * percent // 100, 1), len(snapshots) - 1)


def program_source(program: dict) -> str:
    """The program's Go text: its one .go file, or each file after a `// file: PATH` line."""
    files = [f for f in program["files"] if f["path"].endswith(".go")]
    if len(files) == 1:
        return files[0]["text"]
    return "\n".join(f"// file: {f['path']}\n{f['text']}" for f in files)


def program_outcome(runs: list[dict]) -> str:
    """The seed's full_outcome: the program's most common run status (ties: the earliest run's), ok as success."""
    if not runs:
        return UNKNOWN
    statuses: list[str] = [run["status"] for run in runs]
    counts = Counter(statuses)
    status = max(counts, key=lambda s: (counts[s], -statuses.index(s)))
    return OUTCOMES.get(status) or status


def program_records(program: dict, runs: list[dict], views: dict, view: str) -> Iterator[dict]:
    """The point, distribution and trajectory examples of one program."""
    common = {
        "program_id": program["program_id"],
        "program_hash": program["program_hash"],
        "view": view,
        "program_source": program_source(program),
    }
    meta = {
        "full_outcome": program_outcome(runs),
        "concurrency_pattern": UNKNOWN,
        "goroutine_count": max((len({s["goroutine_id"] for s in v}) for v in views.values() if v), default=0),
        "nondeterminism": UNKNOWN,
    }
    points = []
    for run in runs:
        base = common | meta | {"run_index": run["run_index"]}
        if run["status"] == "race" and run["stderr_tail"]:
            base["race_output"] = run["stderr_tail"]
        snapshots = views[run["run_index"]]
        if run["status"] in TIMED_OUT:
            base |= {"split_percent": 0, "partial_trace": [], "next_event": None, "timed_out": True}
            points.append({"kind": "point", **base})
            continue
        if snapshots is None or len(snapshots) < MIN_EVENTS:
            continue
        for percent in SPLIT_PERCENTS:
            k = cut(snapshots, percent)
            point = {"split_percent": percent, "partial_trace": snapshots[:k], "next_event": snapshots[k]}
            points.append({"kind": "point", **base, **point, "timed_out": False})
    yield from points
    yield from distribution_records(common, meta, points)
    for run in runs:
        snapshots = views[run["run_index"]]
        if run["status"] not in TIMED_OUT and snapshots is not None and len(snapshots) >= MIN_EVENTS:
            yield from trajectory_records(common, meta, run["run_index"], snapshots)


def distribution_records(common: dict, meta: dict, points: list[dict]) -> Iterator[dict]:
    """One example per cut fraction: every run cut there pooled, whatever its prefix (the seed's key)."""
    for percent in SPLIT_PERCENTS:
        group = [p for p in points if p["split_percent"] == percent and p["next_event"] is not None]
        if not group:
            continue
        counts = Counter(p["next_event"]["event_type"] for p in group)
        observed = {t: counts[t] for t in dict.fromkeys(p["next_event"]["event_type"] for p in group)}
        total = sum(counts[t] for t in EVENT_TYPES)
        yield {
            "kind": "distribution",
            **common,
            "split_percent": percent,
            "concurrency_pattern": meta["concurrency_pattern"],
            "nondeterminism": meta["nondeterminism"],
            "full_outcome": meta["full_outcome"],
            "run_count": len(group),
            "runs": [p["run_index"] for p in group],
            "observed_counts": {t: n for t, n in observed.items() if t in EVENT_TYPES},
            "next_event_distribution": {t: counts[t] / total for t in EVENT_TYPES},
            "dirichlet_posterior": {t: JEFFREYS_ALPHA + counts[t] for t in EVENT_TYPES},
            "partial_trace": group[0]["partial_trace"],
        }


def trajectory_records(common: dict, meta: dict, run_index: int, snapshots: list[dict]) -> Iterator[dict]:
    """A run's trajectories: from the prefix at one fraction, the next events up to the next fraction's cut
    (3 to 5 turns), the context capped to the prefix's last 10 events."""
    for name, start, stop in TRAJECTORIES:
        k, end = cut(snapshots, start), cut(snapshots, stop)
        steps = snapshots[k : min(end, k + MAX_STEPS)]
        if len(steps) < MIN_STEPS:
            continue
        yield {
            "kind": "trajectory",
            **common,
            "run_index": run_index,
            "trajectory_type": name,
            "concurrency_pattern": meta["concurrency_pattern"],
            "nondeterminism": meta["nondeterminism"],
            "n_steps": len(steps),
            "seed_trace": snapshots[max(k - MAX_SEED_EVENTS, 0) : k],
            "steps": steps,
            "targets": [{"event_type": s["event_type"], "goroutine_id": s["goroutine_id"]} for s in steps],
        }
