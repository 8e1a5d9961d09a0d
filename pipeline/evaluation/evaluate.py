"""`tracegen evaluate --run RUN --data DATASET --out RESULTS.json`: score a trained neural debugger.

Trajectories: each `trajectories.text` is cut after every action (pipeline/format/documents.py's
spans: prompt, then action span / state span pairs); the model decodes greedily from the cut until it has
written one state (a frame through `<|frame_sep|>`, or an end token) or `--max-new-tokens`; the prediction is
parsed with the formal language's parser (`parse_state`, deltas against the true last locals) and compared
with the true state: exact match of the whole state and of each component (event, source line, locals, arg),
per action. An unparsable prediction matches nothing. Two CruxEval-style views of the same cuts: output
prediction (the return value: `step_return` from the entry call, landing on its return) and input prediction
(the arguments: `inv_step_call`, landing on the call).
Baselines (pipeline/evaluation/baselines.py: copy, next line, oracle structure) are scored on the same cuts,
in `baselines`, and printed under each of the model's rows.

Go: for each exact-prefix `go_next_event` row, the model's distribution over the outcome tokens after the
example's `<|go_next|>` against the empirical one: top-1 accuracy (per most frequent event type too),
expected calibration error (10 bins of the top probability) and KL(empirical ‖ model), in
pipeline/evaluation/go_metrics.py; `go_skipped` counts the rows whose program source alone does not fit.
Multi-step rollouts from the `go_trajectories` windows, scored by the scheduler's validity checker (`go_rollouts`:
`rollout_valid_steps`, the mean number of valid steps before the first violation, and `rollouts`, how many):
pipeline/evaluation/go_rollouts.py.

With `--per-cut` the results also list every scored cut (`CutLog`), so models trained on differently formatted data
can be compared on their common cuts (pipeline/ablate/compare.py).

Split: `heldout` (default) keeps only the sources `pipeline.format.split.is_heldout` puts aside — the
sources `tracegen pack --holdout` left out of training (a split by source, never by trajectory); `all` keeps
every source (e.g. to check that a model memorised its training set).

A benchmark file instead of a dataset (`--benchmark`, CruxEval-style pass@k): pipeline/evaluation/benchmark.py.
"""

import json
import math
import os
from collections import defaultdict

import torch

from pipeline.debugger.language import VALUED, LanguageError, State, parse, parse_state
from pipeline.engine.progress import Steps
from pipeline.engine.reader import table_rows
from pipeline.evaluation.baselines import BASELINES, baseline_states
from pipeline.evaluation.go_metrics import go_examples, go_metrics
from pipeline.evaluation.go_rollouts import go_rollout_metrics, rollout_summary
from pipeline.format.documents import trajectory_spans
from pipeline.format.split import EVALUATION_SPLITS, is_heldout
from pipeline.model.decoding import Model
from pipeline.model.network import DecodeCache

COMPONENTS = ("event", "source", "locals", "arg")
CUT_KEY = ("trace_id", "direction", "sample_index")  # with k, names a cut whatever the text's format (CutLog)


class Scorer:
    """Exact-match counts per action and component."""

    def __init__(self):
        self.cuts: dict[str, int] = defaultdict(int)
        self.hits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, action: str, predicted: State | None, truth: State) -> dict[str, bool]:
        same = {
            "event": predicted is not None and predicted.event == truth.event,
            "source": predicted is not None and predicted.source == truth.source,
            "locals": predicted is not None and predicted.locals == truth.locals,
            "arg": predicted is not None and predicted.arg == truth.arg,
        }
        same["state"] = all(same.values())
        self.cuts[action] += 1
        for key, hit in same.items():
            self.hits[action][key] += hit
        return same

    def table(self) -> dict:
        return {
            action: {"cuts": n, **{key: self.hits[action][key] / n for key in ("state", *COMPONENTS)}}
            for action, n in sorted(self.cuts.items())
        }


def view_of(action: str, k: int, truth: State) -> str | None:
    """Which CruxEval-style view a cut also counts in: `output` (the first action a `step_return` from the entry
    call, landing on its return), `input` (an `inv_step_call` landing on the call), or none."""
    if k == 0 and action == "step_return" and truth.event == "return":
        return "output"
    if action == "inv_step_call" and truth.event == "inv_call":
        return "input"
    return None


class Board:
    """One predictor's scores (the model's or a baseline's): exact match per action, and the two CruxEval-style
    views of the same cuts, output (`step_return` from the entry call onto its return) and input
    (`inv_step_call` onto the call)."""

    def __init__(self):
        self.scorer, self.output, self.input = Scorer(), Scorer(), Scorer()

    def add(self, action: str, k: int, predicted: State | None, truth: State) -> dict[str, bool]:
        """Score one cut; returns its hits per component (and `state`, all of them)."""
        same = self.scorer.add(action, predicted, truth)
        view = view_of(action, k, truth)
        if view == "output":
            self.output.add("return value", predicted, truth)
        elif view == "input":
            self.input.add("arguments", predicted, truth)
        return same

    def results(self) -> dict:
        return {
            "per_action": self.scorer.table(),
            "output_prediction": self.output.table().get("return value"),
            "input_prediction": self.input.table().get("arguments"),
        }


class CutLog:
    """Each scored cut's hits, by predictor, under a key that names the cut whatever the text's format: the
    trajectory's trace, direction and sample index (which fix its actions: pipeline/debugger/policy.py), and
    the action's position k. Two models evaluated on datasets sampled with the same seed and per-trace count
    (their locals written in full or as deltas alike) can be compared on exactly their common cuts."""

    def __init__(self):
        self.rows: list[dict] = []
        self.trajectory: dict = {}

    def start(self, row: dict) -> None:
        self.trajectory = {key: row[key] for key in CUT_KEY}

    def add(self, k: int, action: str, view: str | None, hits: dict[str, dict[str, bool]]) -> None:
        self.rows.append({**self.trajectory, "k": k, "action": action, "view": view, "hits": hits})


def score_trajectory(
    model: Model,
    text: str,
    boards: dict[str, Board],
    max_new_tokens: int,
    cuts: "CutLog | None" = None,
    limit: int | None = None,
) -> int:
    """Score every cut of one trajectory whose prompt fits in the model's context (a prediction that runs
    past the context is cut there, and scored as it is), its first `limit` cuts only (None: all), on
    `boards["model"]`, and the baselines' predictions of the same cuts on their boards (and on `cuts`, each cut's
    hits); returns the cuts skipped because the prompt does not fit."""
    episode = parse(text)
    spans = trajectory_spans(text)
    cache = DecodeCache(model.config.layers)
    if not model.fits(cache, spans[0].text):
        return len(episode.actions)
    model.prefill(spans[0].text, cache)
    first = episode.states[0]
    written = None if first.event in VALUED else first.locals
    for k, action in enumerate(episode.actions):
        if k == limit:
            return 0
        action_span, state_span = spans[1 + 2 * k], spans[2 + 2 * k]
        if not model.fits(cache, action_span.text):
            return len(episode.actions) - k
        last = model.prefill(action_span.text, cache)
        assert last is not None
        truth = episode.states[k + 1]
        try:
            predicted = parse_state(model.next_state_text(last, cache, max_new_tokens), written)
        except LanguageError:
            predicted = None
        hits = {"model": boards["model"].add(action.name, k, predicted, truth)}
        for name, guess in baseline_states(episode, k, written).items():
            hits[name] = boards[name].add(action.name, k, guess, truth)
        if cuts is not None:
            cuts.add(k, action.name, view_of(action.name, k, truth), hits)
        model.prefill(state_span.text, cache)
        if truth.event not in VALUED and not truth.is_end:
            written = truth.locals
    return 0


def score_cuts(
    model: Model,
    data: str,
    split: str,
    max_cuts: int | None,
    max_new_tokens: int,
    cuts: CutLog | None = None,
    max_trajectories: int | None = None,
) -> tuple[dict[str, Board], int, int]:
    """The boards of the model and the baselines over the split's trajectories of `data`, in table order, until
    `max_cuts` cuts are scored (None: no bound; the cuts of the last trajectory past it are not), or
    `max_trajectories` were walked (so the same arguments always score the same cuts; with `max_trajectories`,
    models whose contexts fit different cuts walk the same trajectories); with the number of trajectories walked
    and of cuts skipped because their prompt does not fit. `cuts` gets each cut; a progress line counts them."""
    boards = {name: Board() for name in ("model", *BASELINES)}
    trajectories = skipped = scored = 0
    progress = Steps("evaluate: cuts", max_cuts)
    for row in table_rows(data, "trajectories", ["source_id", "text", *CUT_KEY]):
        if (max_cuts is not None and scored >= max_cuts) or trajectories == max_trajectories:
            break
        if split == "heldout" and not is_heldout(row["source_id"], model.holdout):
            continue
        if cuts is not None:
            cuts.start(row)
        limit = None if max_cuts is None else max_cuts - scored
        skipped += score_trajectory(model, row["text"], boards, max_new_tokens, cuts, limit)
        trajectories += 1
        now = sum(boards["model"].scorer.cuts.values())
        progress.advance(now - scored, note=f"{trajectories} trajectories")
        scored = now
    progress.finish(f"{trajectories} trajectories")
    return boards, trajectories, skipped


def evaluate(
    run: str,
    data: str,
    out: str,
    *,
    split: str = "heldout",
    max_cuts: int | None = 2000,
    max_new_tokens: int = 256,
    device: str | None = None,
    max_rollouts: int = 200,
    seed: int = 0,
    per_cut: bool = False,
    max_trajectories: int | None = None,
) -> dict:
    """Score the run's newest checkpoint on `data`; writes and returns the results (see the module doc); with
    `per_cut`, the results' `cuts` list each cut's key and hits (`CutLog`)."""
    if split not in EVALUATION_SPLITS:
        raise ValueError(f"--split must be one of {', '.join(EVALUATION_SPLITS)}, got {split!r}")
    model = Model.load(run, device or ("cuda" if torch.cuda.is_available() else "cpu"))
    holdout = model.holdout
    if split == "heldout" and holdout == 0.0:
        raise ValueError(
            f"the run's packed data ({model.data}) held no source out (tracegen pack --holdout 0): pack with "
            f"--holdout 0.1 and train on that, or evaluate with --split all"
        )
    cuts = CutLog() if per_cut else None
    boards, trajectories, skipped = score_cuts(model, data, split, max_cuts, max_new_tokens, cuts, max_trajectories)
    results = {
        "run": os.path.abspath(run),
        "step": model.step,
        "data": data,
        "split": split,
        "holdout": holdout,
        "trajectories": trajectories,
        "cuts_skipped": skipped,  # their prompt does not fit in the model's context
        **boards["model"].results(),
        "baselines": {name: boards[name].results() for name in BASELINES},
    }
    if cuts is not None:
        results["cuts"] = cuts.rows
    examples, results["go_skipped"] = go_examples(data, split, holdout, model.tokenizer, model.config.seq_len)
    if examples:
        results["go"] = go_metrics(model, examples)
    rollouts = go_rollout_metrics(model, data, split, holdout, max_rollouts, seed)
    if rollouts:
        results["go_rollouts"] = rollouts
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    return results


def table_rows_of(board: dict) -> dict[str, dict]:
    """A predictor's rows by label: its actions, then the output and input views when there were such cuts."""
    rows = dict(board["per_action"])
    for name, key in (("output (return)", "output_prediction"), ("input (args)", "input_prediction")):
        if board.get(key):
            rows[name] = board[key]
    return rows


def results_table(results: dict) -> str:
    """The per-action table as text (what `tracegen evaluate` prints): each model row, then the baselines' rows of
    the same cuts, indented."""
    header = f"{'action':<18}{'cuts':>7}" + "".join(f"{key:>9}" for key in ("state", *COMPONENTS))
    lines = [f"step {results['step']}, split {results['split']}, {results['trajectories']} trajectories", header]
    baselines = {name: table_rows_of(board) for name, board in results.get("baselines", {}).items()}
    for action, row in table_rows_of(results).items():
        lines.append(f"{action:<18}{row['cuts']:>7}" + "".join(f"{row[key]:>9.3f}" for key in ("state", *COMPONENTS)))
        for name, rows in baselines.items():
            cells = "".join(f"{rows[action][key]:>9.3f}" for key in ("state", *COMPONENTS))
            lines.append(f"  {name:<23}{cells}")
    go = results.get("go")
    if go:
        lines.append(
            f"go: {go['examples']} examples, top-1 {go['top1_accuracy']:.3f}, macro {go['macro_accuracy']:.3f}, "
            f"ECE {go['ece']:.3f}, KL {go['kl']:.3f}"
            + ("" if math.isfinite(go["kl"]) else " (KL infinite: the model gives 0 to an observed event)")
        )
    if results.get("go_rollouts"):
        lines.append(rollout_summary(results["go_rollouts"]))
    return "\n".join(lines)
