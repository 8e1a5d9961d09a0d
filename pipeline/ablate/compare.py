"""An ablation's side-by-side comparison: every variant scored on the cuts all of them scored, with the baselines.

Each variant's `tracegen evaluate --per-cut` results name every cut it scored by its trajectory (trace, direction,
sample index) and the action's position, whatever the variant's text format (pipeline/evaluation/evaluate.py,
`CutLog`). A variant skips a cut whose prompt does not fit its context (full locals take more tokens than deltas,
BPE fewer than bytes), so the table is scored on the cuts *every* variant scored — the same cuts, the same truth —
and says how many that is of each variant's own. The baselines (pipeline/evaluation/baselines.py) of those cuts are
the same for every variant (they read no model), so they are rows of their own.

Written into the ablation's directory: `ablation.md` (the table, then the learning curves' image), `curves.png`
(training loss, and held-out whole-state exact match against tokens seen, one line per variant; the baselines as
horizontal lines) and `ablation.json` (everything in the table, per variant).
"""

import json
import os
from collections import defaultdict

from pipeline.ablate.run import STATE, write_json
from pipeline.evaluation.baselines import BASELINES
from pipeline.evaluation.evaluate import COMPONENTS, CUT_KEY
from pipeline.pretrain.curve_report import BASELINE_STYLES, overall_baselines, read_metrics
from pipeline.pretrain.flops import mfu

VIEWS = ("output", "input")  # the CruxEval-style views: return value from the entry call, arguments of the call


def cut_key(cut: dict) -> tuple:
    return (*(cut[key] for key in CUT_KEY), cut["k"])


def scores(cuts: list[dict], predictor: str) -> dict:
    """Whole-state and per-component exact match of `predictor` over `cuts`: overall, per action, per view."""
    total = defaultdict(int)
    by_action, by_view = defaultdict(lambda: [0, 0]), defaultdict(lambda: [0, 0])
    for cut in cuts:
        hits = cut["hits"][predictor]
        for key in ("state", *COMPONENTS):
            total[key] += hits[key]
        for table, name in ((by_action, cut["action"]), (by_view, cut.get("view"))):
            if name is not None:
                table[name][0] += 1
                table[name][1] += hits["state"]
    n = max(len(cuts), 1)
    return {
        "cuts": len(cuts),
        **{key: total[key] / n for key in ("state", *COMPONENTS)},
        "per_action": {action: {"cuts": c, "state": h / c} for action, (c, h) in sorted(by_action.items())},
        "views": {view: {"cuts": c, "state": h / c} for view, (c, h) in sorted(by_view.items())},
    }


def compare(out: str, done: list[dict], device: str = "cpu") -> dict:
    """The comparison of the variants `done` (Ablation.run's), trained on `device`, written into `out`; returns
    what ablation.json holds."""
    cut_sets, rows = [], []
    for item in done:
        with open(item["results"]) as handle:
            results = json.load(handle)
        by_key = {cut_key(cut): cut for cut in results["cuts"]}
        cut_sets.append(by_key)
        steps, _ = read_metrics(item["run"])
        last = steps[-1] if steps else {}
        variant = item["variant"]
        rows.append(
            {
                "name": variant.name,
                "options": variant.options,
                "run": item["run"],
                "steps": item["steps"],
                "tokens": last.get("tokens"),
                "loss": last.get("loss"),
                "tokens_per_s": last.get("tokens_per_s"),
                "parameters": item["model"].parameters(),
                "mfu": mfu(item["model"], last["tokens_per_s"], device, item["workers"]) if last else None,
                "own_cuts": len(by_key),
            }
        )
    common = sorted(set.intersection(*(set(cuts) for cuts in cut_sets))) if cut_sets else []
    for row, cuts in zip(rows, cut_sets, strict=True):
        row["scores"] = scores([cuts[key] for key in common], "model")
    base_cuts = [cut_sets[0][key] for key in common] if cut_sets else []
    comparison = {
        "device": device,
        "common_cuts": len(common),
        "variants": rows,
        "baselines": {name: scores(base_cuts, name) for name in BASELINES},
    }
    with open(os.path.join(out, STATE)) as handle:
        state = json.load(handle)
    write_json(os.path.join(out, STATE), {**state, "comparison": comparison})
    plot_curves(out, done)
    with open(os.path.join(out, "ablation.md"), "w") as handle:
        handle.write(markdown(comparison) + "\n\n![learning curves](curves.png)\n")
    return comparison


def markdown(comparison: dict) -> str:
    """The side-by-side table: a row per variant, then the baselines on the same cuts."""
    rows, baselines = comparison["variants"], comparison["baselines"]
    actions = sorted({action for row in rows for action in row["scores"]["per_action"]})
    views = [view for view in VIEWS if any(view in row["scores"]["views"] for row in rows)]
    header = ["variant", "options", "tokens", "loss", "state", *COMPONENTS, *actions, *views]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def cells(score: dict) -> list[str]:
        return [
            f"{score['state']:.3f}",
            *(f"{score[key]:.3f}" for key in COMPONENTS),
            *(_cell(score["per_action"].get(action)) for action in actions),
            *(_cell(score["views"].get(view)) for view in views),
        ]

    for row in rows:
        loss = "—" if row["loss"] is None else f"{row['loss']:.3f}"
        tokens = "—" if row["tokens"] is None else f"{row['tokens']:,}"
        options = f"`{row['options']}`" if row["options"] else "(defaults)"
        lines.append("| " + " | ".join([row["name"], options, tokens, loss, *cells(row["scores"])]) + " |")
    for name, score in baselines.items():
        lines.append("| " + " | ".join([f"*{name}*", "(baseline)", "", "", *cells(score)]) + " |")
    own = ", ".join(f"{row['name']} {row['own_cuts']}" for row in rows)
    speed = ", ".join(
        f"{row['name']} {row['tokens_per_s']:,.0f}" + ("" if row["mfu"] is None else f" (MFU {row['mfu']:.1%})")
        for row in rows
        if row["tokens_per_s"] is not None
    )
    lines += [
        "",
        f"Exact match on the {comparison['common_cuts']} held-out cuts every variant scored (each variant scored: "
        f"{own}): the whole state, each of its components, and the whole state per action and per view (output: "
        f"the return value from the entry call; input: the call's arguments). Tokens/s on {comparison['device']}: "
        f"{speed}; {rows[0]['parameters']:,} parameters (the base's vocabulary).",
    ]
    return "\n".join(lines)


def _cell(score: dict | None) -> str:
    return "—" if score is None else f"{score['state']:.3f}"


def plot_curves(out: str, done: list[dict]) -> None:
    """curves.png: training loss, and the learning curve's whole-state exact match, against tokens, per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loss_axes, match_axes) = plt.subplots(1, 2, figsize=(11, 4))
    baselines: dict[str, float] = {}
    for item in done:
        steps, points = read_metrics(item["run"])
        name = item["variant"].name
        loss_axes.plot([s["tokens"] for s in steps], [s["loss"] for s in steps], label=name)
        if points:
            match_axes.plot([p["tokens"] for p in points], [p["eval"]["state"] for p in points], marker="o", label=name)
            baselines = baselines or overall_baselines(points[-1]["eval"])
    for name, value in baselines.items():
        match_axes.axhline(value, linestyle=BASELINE_STYLES.get(name, ":"), color="#7f7f7f", label=name)
    loss_axes.set(title="training loss (per token of each variant's tokenizer)", xlabel="tokens seen", ylabel="loss")
    match_axes.set(title="held-out state exact match", xlabel="tokens seen", ylabel="exact match", ylim=(-0.05, 1.05))
    loss_axes.legend(fontsize=7)
    match_axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(out, "curves.png"), dpi=90)
    plt.close(figure)
