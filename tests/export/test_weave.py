"""`tracegen export --dialect weave` on a real Go dataset of two small programs: the seed's point,
distribution and trajectory examples, golden for the program view (timestamps masked: they are wall
time), the seed's raw view checked against the program view, and the seed's transition mapping.

Regenerate the golden file after an intended change with TRACEGEN_UPDATE_GOLDEN=1.
"""

import json
import os
from pathlib import Path

import pytest
from go_helpers import requires_bwrap, requires_go

from pipeline.engine.job import run_job
from pipeline.export import export
from pipeline.export.weave import EVENT_TYPES, seed_transition
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.stages.go.runs import GoSettings

GOLDEN = Path(__file__).with_name("weave_golden.jsonl")

PINGPONG = """// Command pingpong passes a ball back and forth three times over two
// unbuffered channels, then the player goroutine ends.
package main

func player(ping <-chan int, pong chan<- int) {
	for ball := range ping {
		pong <- ball + 1
	}
}

func main() {
	ping, pong := make(chan int), make(chan int)
	go player(ping, pong)
	ball := 0
	for range 3 {
		ping <- ball
		ball = <-pong
	}
	close(ping)
}
"""

STUCK = """// tracegen: timeout=500ms

// Command stuck waits for a value nobody sends: it deadlocks at once, so
// its header gives it a short timeout.
package main

func main() {
	never := make(chan int)
	go func() { <-never }()
	<-never
}
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, ray_local) -> str:
    root = tmp_path_factory.mktemp("weave")
    for name, text in (("pingpong", PINGPONG), ("stuck", STUCK)):
        (root / "programs" / name).mkdir(parents=True)
        (root / "programs" / name / "main.go").write_text(text)
    out = str(root / "out")
    # One P: the ping-pong's order is then the same in every run, so the examples are golden.
    run_job(GoKind(), str(root / "programs"), GoConfig(go=GoSettings(runs=3, gomaxprocs=(1,))), out, workers=2)
    return out


def exported(dataset: str, tmp_path: Path, **options) -> list[dict]:
    out = tmp_path / "weave.jsonl"
    written = export("weave", dataset, str(out), **options)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == len(records)
    return records


def masked(record: dict) -> dict:
    """The record with every snapshot's timestamp_ns set to 0."""
    text = json.dumps(record)
    value = json.loads(text)
    for key in ("partial_trace", "seed_trace", "steps"):
        for snapshot in value.get(key) or []:
            snapshot["timestamp_ns"] = 0
    if value.get("next_event"):
        value["next_event"]["timestamp_ns"] = 0
    return value


@requires_go
@requires_bwrap
def test_program_view_matches_the_golden_examples(dataset, tmp_path):
    records = exported(dataset, tmp_path)
    for record in records:
        for key in ("partial_trace", "seed_trace", "steps"):
            times = [s["timestamp_ns"] for s in record.get(key) or []]
            assert times == sorted(times)
    got = [masked(record) for record in records]
    if os.environ.get("TRACEGEN_UPDATE_GOLDEN"):
        GOLDEN.write_text("".join(json.dumps(record, sort_keys=True) + "\n" for record in got))
    want = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    assert got == want


@requires_go
@requires_bwrap
def test_the_examples_are_the_seeds_shapes(dataset, tmp_path):
    records = exported(dataset, tmp_path)
    kinds = [(r["kind"], r["program_id"]) for r in records]
    # pingpong: 3 runs x 3 fractions, 3 pooled fractions, 2 trajectories per run; stuck: one per timed-out run.
    assert (
        kinds
        == [("point", "pingpong")] * 9
        + [("distribution", "pingpong")] * 3
        + [("trajectory", "pingpong")] * 6
        + [("point", "stuck")] * 3
    )
    stuck = [r for r in records if r["program_id"] == "stuck"]
    assert all(r["timed_out"] and r["next_event"] is None and r["split_percent"] == 0 for r in stuck)
    assert {r["full_outcome"] for r in stuck} == {"deadlock"}
    for record in records:
        if record["kind"] == "distribution":
            dist = record["next_event_distribution"]
            assert list(dist) == list(EVENT_TYPES) and abs(sum(dist.values()) - 1) < 1e-9
            assert record["run_count"] == 3 and record["runs"] == [0, 1, 2]
        if record["kind"] == "trajectory":
            assert 3 <= record["n_steps"] == len(record["steps"]) <= 5 and len(record["seed_trace"]) <= 10
            assert record["targets"] == [
                {"event_type": s["event_type"], "goroutine_id": s["goroutine_id"]} for s in record["steps"]
            ]


@requires_go
@requires_bwrap
def test_runtime_view_adds_the_runtimes_goroutines(dataset, tmp_path):
    program = exported(dataset, tmp_path)
    runtime = exported(dataset, tmp_path, runtime_goroutines=True)
    assert [(r["kind"], r["program_id"], r.get("run_index")) for r in runtime] == [
        (r["kind"], r["program_id"], r.get("run_index")) for r in program
    ]
    assert {r["view"] for r in runtime} == {"runtime"} and {r["view"] for r in program} == {"program"}
    for ours, raw in zip(program, runtime, strict=True):
        if ours["kind"] != "point" or ours["timed_out"]:
            continue
        ours_ids = {g for s in ours["partial_trace"] for g in s["goroutines"]}
        raw_ids = {g for s in raw["partial_trace"] for g in s["goroutines"]}
        assert ours_ids == {"0", "1"}  # canonical: main and its player
        assert "1" in raw_ids and len(raw_ids) > len(ours_ids)  # raw: main is 1, and the runtime's are there
        assert raw["partial_trace"][0]["timestamp_ns"] > 10**6  # the trace's own clock, not rebased
        hints = {g["locals_hint"] for s in raw["partial_trace"] for g in s["goroutines"].values()}
        assert any(h.startswith("runtime.") for h in hints)


def test_the_seeds_transition_mapping():
    cases = {
        ("Undetermined", "Running", ""): (None, None),
        ("NotExist", "Runnable", ""): ("GoCreate", None),
        ("NotExist", "Waiting", ""): (None, None),
        ("Runnable", "Running", ""): ("GoStart", None),
        ("Syscall", "Running", ""): ("GoStart", None),
        ("Running", "Waiting", "chan receive"): ("GoBlock", "chan receive"),
        ("Running", "Syscall", ""): ("GoBlock", "syscall"),
        ("Waiting", "Runnable", ""): ("GoUnblock", None),
        ("Syscall", "Runnable", ""): ("GoUnblock", None),
        ("Running", "Runnable", "preempted"): ("GoSched", None),
        ("Running", "NotExist", ""): ("GoEnd", None),
    }
    for transition, want in cases.items():
        assert seed_transition(*transition) == want, transition
