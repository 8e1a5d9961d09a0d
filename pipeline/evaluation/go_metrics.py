"""Go next-event metrics of `tracegen evaluate`: for each held-out exact-prefix `go_next_event` row, the model's
distribution over the outcome tokens after the example's `<|go_next|>` against the empirical one — top-1 accuracy
(overall, per most frequent event type, and their macro average), expected calibration error and KL(empirical ‖
model). The prompts are the packed examples' (pipeline/format/go_examples.py), windowed for the model's
`seq_len`."""

from collections import Counter, defaultdict

import numpy as np

from pipeline.engine.progress import counted
from pipeline.engine.reader import table_rows
from pipeline.format.go_examples import go_documents
from pipeline.format.split import is_heldout
from pipeline.format.tokenizer import PackTokenizer
from pipeline.model.decoding import Model
from schemas.go_next_event import OUTCOMES

ECE_BINS = 10


def go_metrics(model: Model, examples: list[tuple[str, np.ndarray]]) -> dict:
    """Top-1 accuracy (overall, by the most frequent event type, and their macro average: each type that occurs
    counts once, so rare events weigh as much as common ones), ECE and mean KL over the examples."""
    correct, kls, by_type = [], [], defaultdict(list)
    confidences = []
    for prompt, empirical in counted(examples, "evaluate: Go examples", len(examples)):
        predicted = model.outcome_distribution(prompt)
        hit = int(predicted.argmax()) == int(empirical.argmax())
        correct.append(hit)
        confidences.append(float(predicted.max()))
        by_type[OUTCOMES[int(empirical.argmax())]].append(hit)
        kls.append(kl_divergence(empirical, predicted))
    by_event = {name: float(np.mean(hits)) for name, hits in sorted(by_type.items())}
    return {
        "examples": len(examples),
        "top1_accuracy": float(np.mean(correct)),
        "macro_accuracy": float(np.mean(list(by_event.values()))),
        "accuracy_by_event": by_event,
        "ece": expected_calibration_error(np.array(confidences), np.array(correct, dtype=float)),
        "kl": float(np.mean(kls)),
    }


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p ‖ q) in nats; terms where p is 0 contribute nothing."""
    support = p > 0
    return float(np.sum(p[support] * (np.log(p[support]) - np.log(np.maximum(q[support], 1e-30)))))


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray) -> float:
    edges = np.linspace(0, 1, ECE_BINS + 1)
    total = 0.0
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (confidence > low) & (confidence <= high)
        if inside.any():
            total += inside.mean() * abs(confidence[inside].mean() - correct[inside].mean())
    return float(total)


def go_examples(
    data: str, split: str, holdout: float, tokenizer: PackTokenizer, seq_len: int
) -> tuple[list[tuple[str, np.ndarray]], int]:
    """(prompt, empirical distribution) of every exact-prefix row of the split, as `tracegen pack` builds its
    example for `seq_len`; and how many rows were skipped because their program source does not fit."""
    rows = [
        r
        for r in table_rows(data, "go_next_event")
        if r["prefix_kind"] == "exact" and (split == "all" or is_heldout(r["program_id"], holdout))
    ]
    if not rows:
        return [], 0
    programs = {row["program_id"] for row in rows}
    runs = (r for r in table_rows(data, "go_runs") if r["program_id"] in programs)
    sources = (r for r in table_rows(data, "go_programs") if r["program_id"] in programs)
    skipped: Counter = Counter()
    examples = []
    for document in go_documents(rows, runs, sources, tokenizer=tokenizer, seq_len=seq_len, dropped=skipped):
        head, outcome = document.spans[0], document.spans[1]
        assert outcome.target is not None
        counts, n = outcome.target
        examples.append((head.text, np.array(counts, dtype=float) / max(n, 1)))
    return examples, sum(skipped.values())
