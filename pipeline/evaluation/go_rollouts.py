"""Multi-step Go rollouts for `tracegen evaluate`: from held-out `go_trajectories` windows the model writes the
next scheduler events itself, and the scheduler's validity checker counts how many are valid.

For each window of the split (at most `max_rollouts`, in table order; a window that starts with End has nothing to
roll out): the prompt is the packed document's text through `<|go_rollout|>` (pipeline/stages/pack/
go_trajectories.py, windowed for the model's `seq_len`); the checker (pipeline/goscheduler/validity.py, with the
run's GOMAXPROCS) replays the real prefix — the scheduler events of the window's first run, from go_runs. Then
step by step: the type token is sampled (seeded) from the model's distribution over the outcome tokens, the rest
of the line is decoded greedily until its newline (at most `MAX_LINE_TOKENS` tokens), and the line is parsed
back into an event (`parse_step`: the inverse of go_examples.event_line). End, a line that does not parse, the
end of the model's context, or the checker's first violation ends the rollout. Its score is the number of valid
steps before that, capped at the window's events (k, or fewer where the run ended inside the window). A real
prefix the checker rejects is a parser bug, not the model's: it is counted (`prefix_invalid`), not rolled out.
"""

import re
from collections.abc import Sequence
from itertools import islice

import numpy as np
import torch

from pipeline.debugger.language import unescape
from pipeline.engine.progress import counted
from pipeline.engine.reader import table_rows
from pipeline.format.go_examples import GoExamples
from pipeline.format.go_trajectories import needed_trajectory_runs, trajectory_document
from pipeline.format.split import is_heldout
from pipeline.goscheduler.events import scheduler_events
from pipeline.goscheduler.validity import SchedulerChecker
from pipeline.model.decoding import Model
from pipeline.model.network import DecodeCache
from schemas.go_next_event import END, OUTCOMES

MAX_LINE_TOKENS = 96
_LINE = re.compile(r"g(\d+)(?: \((.*)\))?(?: (\S+) (\S+):(\d+))?(?: \[(\S+)(?: (.*))?\])?")


def parse_step(event: str, rest: str) -> dict | None:
    """The event a step's line names: `event` is its type (the sampled token's outcome), `rest` the text after
    the type token up to the newline, as event_line writes it (`g{id} (reason) function file:line [object
    state]`, each part after the goroutine when there is one); None when `rest` is not such a line."""
    match = _LINE.fullmatch(unescape(rest))
    if match is None or event not in OUTCOMES or event == END:
        return None
    goroutine, reason, function, file, line, waits_on, state = match.groups()
    return {
        "goroutine": int(goroutine),
        "event": event,
        "reason": reason or "",
        "function": function or "",
        "file": file or "",
        "line": int(line or 0),
        "object": waits_on or "",
        "object_state": state or "",
    }


class Rollout:
    """Rollouts of one model: the model, and the seeded generator its type tokens are sampled with."""

    def __init__(self, model: Model, seed: int):
        self.model = model
        self.generator = torch.Generator(device=model.device).manual_seed(seed)

    def extend(self, token: int, cache: DecodeCache) -> torch.Tensor:
        with torch.no_grad():
            return self.model.network.extend(torch.tensor([[token]], device=self.model.device), cache)[0, -1]

    def line(self, logits: torch.Tensor, cache: DecodeCache) -> tuple[str, torch.Tensor] | None:
        """The rest of a line decoded greedily from `logits` into `cache`, through its newline: (the text
        before the newline, the logits after it); None when no newline comes within MAX_LINE_TOKENS or the
        context ends first."""
        tokens: list[int] = []
        for _ in range(MAX_LINE_TOKENS):
            if cache.length >= self.model.config.seq_len:
                return None
            token = int(logits.argmax())
            tokens.append(token)
            logits = self.extend(token, cache)
            text = self.model.tokenizer.decode(tokens)
            if "\n" in text:
                return text.split("\n", 1)[0], logits
        return None

    def valid_steps(self, prompt: str, checker: SchedulerChecker, cap: int) -> int:
        """How many steps the model writes after `prompt` that `checker` accepts before the first that ends the
        rollout (End, an unparsable line, a violation, the context's end); at most `cap`."""
        model, cache = self.model, DecodeCache(self.model.config.layers)
        logits = model.prefill(prompt, cache)
        valid = 0
        while logits is not None and valid < cap and cache.length < model.config.seq_len:
            probabilities = torch.softmax(logits[model.outcome_ids].float(), dim=-1)
            choice = int(torch.multinomial(probabilities, 1, generator=self.generator))
            if OUTCOMES[choice] == END:
                break
            written = self.line(self.extend(int(model.outcome_ids[choice]), cache), cache)
            if written is None:
                break
            text, logits = written
            event = parse_step(OUTCOMES[choice], text)
            if event is None or checker.step(event) is not None:
                break
            valid += 1
        return valid


def go_rollout_metrics(model: Model, data: str, split: str, holdout: float, max_rollouts: int, seed: int) -> dict:
    """The mean number of valid steps of the model's rollouts from the split's windows (see the module doc); {}
    when the dataset has no window of the split."""
    if type(max_rollouts) is not int or max_rollouts < 0:
        raise ValueError(f"--max-rollouts must be an int >= 0, got {max_rollouts!r}")
    windows = (
        row
        for row in table_rows(data, "go_trajectories")
        if row["steps"][0]["event"] != END and (split == "all" or is_heldout(row["program_id"], holdout))
    )
    rows = list(islice(windows, max_rollouts))
    if not rows:
        return {}
    needed = needed_trajectory_runs(rows)
    programs = {program_id for program_id, _ in needed}
    runs = [r for r in table_rows(data, "go_runs") if (r["program_id"], r["run_index"]) in needed]
    sources = (r for r in table_rows(data, "go_programs") if r["program_id"] in programs)
    examples = GoExamples(model.tokenizer, model.config.seq_len).load(sources, runs, needed)
    by_run = {(run["program_id"], run["run_index"]): run for run in runs}
    rollout, scores, caps, prefix_invalid = Rollout(model, seed), [], [], 0
    for row in counted(rows, "evaluate: Go rollouts", len(rows)):
        document = trajectory_document(examples, row)
        if document is None:
            continue
        run = by_run[(row["program_id"], row["runs"][0])]
        checker = SchedulerChecker(run["gomaxprocs"])
        if not replays(checker, scheduler_events(run["events"])[: row["depth"]]):
            prefix_invalid += 1
            continue
        caps.append(row["n_steps"] - int(row["ends"]))
        scores.append(rollout.valid_steps(document.spans[0].text, checker, caps[-1]))
    return {
        "rollouts": len(scores),
        "rollout_valid_steps": float(np.mean(scores)) if scores else 0.0,
        "max_steps": float(np.mean(caps)) if caps else 0.0,
        "prefix_invalid": prefix_invalid,
        "skipped": sum(examples.dropped.values()),  # their program source and steps do not fit
    }


def replays(checker: SchedulerChecker, events: Sequence[dict]) -> bool:
    """Step the checker through a real prefix; False at its first violation."""
    return all(checker.step(event) is None for event in events)


def rollout_summary(rollouts: dict) -> str:
    """The line `tracegen evaluate` prints."""
    return (
        f"go rollouts: {rollouts['rollouts']} windows, {rollouts['rollout_valid_steps']:.2f} valid steps before the "
        f"first violation (of {rollouts['max_steps']:.1f} at most)"
        + (f", {rollouts['prefix_invalid']} real prefixes rejected" if rollouts["prefix_invalid"] else "")
    )
