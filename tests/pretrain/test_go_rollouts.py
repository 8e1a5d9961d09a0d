"""Multi-step Go rollouts in `tracegen evaluate`: a step's line parses back into the event it names, and a model
trained on a program's trajectories writes more valid scheduler steps before the first violation than an
untrained one."""

import os

import pytest
from go_helpers import requires_go
from training_helpers import train, train_untrained

from pipeline.engine.job import run_job
from pipeline.evaluation.evaluate import evaluate, results_table
from pipeline.evaluation.go_rollouts import parse_step
from pipeline.format.go_examples import event_line
from pipeline.format.go_tokens import OUTCOME_TOKENS
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.stages.pack.packing import PackSettings

SEQ_LEN = 512
STEPS = 150
MODEL = {"layers": 2, "width": 64, "heads": 2}
ROLLOUTS = 24


def _event(
    kind: str, goroutine: int, reason: str = "", function: str = "main.main", line: int = 9, waits: str = ""
) -> dict:
    waits_on, _, state = waits.partition(" ")
    return {
        "goroutine": goroutine,
        "event": kind,
        "reason": reason,
        "function": function,
        "file": "main.go" if function else "",
        "line": line if function else 0,
        "object": waits_on,
        "object_state": state,
    }


@pytest.mark.parametrize(
    "event",
    [
        _event("GoCreate", 3),
        _event("GoBlock", 1, "chan receive"),
        _event("GoBlock", 12, "sync.(*Cond).Wait", "main.(*queue).pop", 40),  # parentheses in reason and function
        _event("GoEnd", 2, function=""),  # no frame
        _event("GoSyscall", 0, "enter", "main.<|odd|>", 7),  # an escaped payload
        _event("GoTransition", 4, "Waiting->Runnable"),
        _event("GoBlock", 1, "chan receive", waits="chan@main.go:4 recv, len 0/0, senders 0"),  # a rewritten run
        _event("GoUnblock", 2, "", "main.main", 7, "mutex@main.go:3 lock, held by g0"),
    ],
)
def test_a_step_line_parses_back_into_its_event(event):
    line = event_line(event)
    token = OUTCOME_TOKENS[event["event"]]
    assert line.startswith(token) and line.endswith("\n")
    assert parse_step(event["event"], line[len(token) : -1]) == event


NOT_EVENTS = ["", "g", "gx main.main main.go:3", "g1 main.main", "g1 (open", "3 main.main main.go:1"]


@pytest.mark.parametrize("rest", NOT_EVENTS)
def test_a_line_that_is_not_an_event_does_not_parse(rest):
    assert parse_step("GoStart", rest) is None


def test_end_is_not_a_step():
    assert parse_step("End", "g1") is None


HANDOFF = """package main

func main() {
	done := make(chan int)
	go func() { done <- 1 }()
	<-done
}
"""


@pytest.fixture(scope="module")
def go_windows(tmp_path_factory, ray_local) -> str:
    """A one-hand-off Go program (written here: short enough for small samples), 4 runs, cut into windows of 4
    steps every 2."""
    from pipeline.kinds.go import GoConfig, GoKind
    from pipeline.stages.go.runs import GoSettings

    programs = tmp_path_factory.mktemp("rollout-programs")
    (programs / "handoff").mkdir()
    (programs / "handoff" / "main.go").write_text(HANDOFF)
    out = str(tmp_path_factory.mktemp("rollout-go") / "out")
    settings = GoSettings(runs=4, trajectory_window=4, trajectory_stride=2)
    run_job(GoKind(), str(programs), GoConfig(go=settings), out)
    return out


@requires_go
def test_a_trained_model_rolls_out_more_valid_steps_than_an_untrained_one(go_windows, tmp_path):
    packed = str(tmp_path / "packed")
    run_job(PackKind(), go_windows, PackConfig(packing=PackSettings(seq_len=SEQ_LEN)), packed)
    run = str(tmp_path / "run")
    metrics = train(packed, run, STEPS, warmup_steps=10, weight_decay=0.0, log_every=STEPS, model=MODEL)
    learned = evaluate(run, go_windows, str(tmp_path / "learned.json"), split="all", max_rollouts=ROLLOUTS)
    untrained_run = train_untrained(run, str(tmp_path / "untrained"))
    untrained = evaluate(
        untrained_run, go_windows, os.path.join(untrained_run, "results.json"), split="all", max_rollouts=ROLLOUTS
    )
    mine, theirs = learned["go_rollouts"], untrained["go_rollouts"]
    assert mine["rollouts"] == theirs["rollouts"] > 0 and mine["prefix_invalid"] == mine["skipped"] == 0
    assert mine["rollout_valid_steps"] > theirs["rollout_valid_steps"], (mine, theirs, metrics[-1])
    assert 0 <= theirs["rollout_valid_steps"] <= mine["rollout_valid_steps"] <= mine["max_steps"] <= 4
    assert "go rollouts:" in results_table(learned)
