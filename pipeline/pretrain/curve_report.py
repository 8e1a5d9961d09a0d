"""`tracegen report RUN`: a training run's curves as RUN/report.html with its PNGs beside it.

From RUN/metrics.jsonl (pipeline/pretrain/curve.py): `loss.png`, the training loss against tokens seen; and, when
the run logged learning-curve points (`--eval-every`), `exact_match.png`, whole-state exact match on the fixed
held-out slice against tokens seen, overall and per action, one panel each, with the baselines of the same cuts as
horizontal lines. The page lists the run's configuration and the last point's table. matplotlib (Agg: no display)
is imported here only.
"""

import html
import json
import os

from pipeline.model.checkpoints import CONFIG_FILE, METRICS

BASELINE_STYLES = {"copy": ":", "next_line": "--", "oracle_structure": "-."}


def read_metrics(run: str) -> tuple[list[dict], list[dict]]:
    """(the step lines, the learning-curve points) of the run's metrics.jsonl; ValueError when there is none."""
    path = os.path.join(run, METRICS)
    if not os.path.isfile(path):
        raise ValueError(f"{run!r} has no {METRICS}: give a run directory of tracegen pretrain")
    with open(path) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [r for r in records if "loss" in r], [r for r in records if "eval" in r]


def panels(points: list[dict]) -> dict[str, tuple[list[int], list[float], dict[str, float]]]:
    """Per panel ("all cuts", then each action): (tokens, the model's exact match, each baseline's value)."""
    last = points[-1]["eval"]
    out = {"all cuts": ([p["tokens"] for p in points], [p["eval"]["state"] for p in points], overall_baselines(last))}
    for action in sorted(last["per_action"]):
        seen = [p for p in points if action in p["eval"]["per_action"]]
        out[action] = (
            [p["tokens"] for p in seen],
            [p["eval"]["per_action"][action]["state"] for p in seen],
            {name: table[action]["state"] for name, table in last["baselines"].items() if action in table},
        )
    return out


def overall_baselines(point: dict) -> dict[str, float]:
    """Each baseline's whole-state exact match over all the point's cuts."""
    cuts = max(point["cuts"], 1)
    return {
        name: sum(row["state"] * row["cuts"] for row in table.values()) / cuts
        for name, table in point["baselines"].items()
    }


def write_run_report(run: str) -> str:
    """Write report.html and its PNGs into the run directory; returns the HTML's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, points = read_metrics(run)
    images = []
    if steps:
        figure, axes = plt.subplots(figsize=(7, 3.5))
        axes.plot([s["tokens"] for s in steps], [s["loss"] for s in steps], color="#4472c4")
        axes.set(title="training loss", xlabel="tokens seen", ylabel="loss")
        _save(plt, figure, os.path.join(run, "loss.png"))
        images.append(("training loss", "loss.png"))
    if points:
        drawn = panels(points)
        columns = min(3, len(drawn))
        rows = -(-len(drawn) // columns)
        figure, grid = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
        used = list(grid.flat)[: len(drawn)]
        for axes, (title, (tokens, scores, baselines)) in zip(used, drawn.items(), strict=True):
            axes.plot(tokens, scores, marker="o", color="#4472c4", label="model")
            for name, value in baselines.items():
                axes.axhline(value, linestyle=BASELINE_STYLES.get(name, ":"), color="#7f7f7f", label=name)
            axes.set(title=title, xlabel="tokens seen", ylabel="state exact match", ylim=(-0.05, 1.05))
        for axes in list(grid.flat)[len(drawn) :]:
            axes.axis("off")
        grid.flat[0].legend(fontsize=7)
        _save(plt, figure, os.path.join(run, "exact_match.png"))
        images.append(("held-out exact match (baselines: horizontal lines)", "exact_match.png"))
    path = os.path.join(run, "report.html")
    with open(path, "w") as handle:
        handle.write(_html(run, steps, points, images))
    return path


def _save(plt, figure, path: str) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _html(run: str, steps: list[dict], points: list[dict], images: list[tuple[str, str]]) -> str:
    config_path = os.path.join(run, CONFIG_FILE)
    config = "{}"
    if os.path.isfile(config_path):
        with open(config_path) as handle:
            config = handle.read()
    last = ""
    if points:
        point = points[-1]["eval"]
        names = ["model", *point["baselines"]]
        header = "".join(f"<th>{html.escape(name)}</th>" for name in ["action", "cuts", *names])
        body = "".join(
            f"<tr><td>{html.escape(action)}</td><td>{row['cuts']}</td><td>{row['state']:.3f}</td>"
            + "".join(f"<td>{point['baselines'][name][action]['state']:.3f}</td>" for name in names[1:])
            + "</tr>"
            for action, row in sorted(point["per_action"].items())
        )
        last = f"<h2>step {points[-1]['step']}: state exact match</h2><table><tr>{header}</tr>{body}</table>"
    figures = "".join(
        f'<h2>{html.escape(title)}</h2><img src="{name}" alt="{html.escape(title)}">' for title, name in images
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>tracegen run report</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}td,th{padding:2px 10px;text-align:right}"
        "pre{font-size:12px;background:#f4f4f4;padding:8px}</style>"
        f"</head><body><h1>tracegen run {html.escape(os.path.abspath(run))}</h1>"
        f"<p>{len(steps)} logged steps, {len(points)} curve points</p>{last}{figures}"
        f"<h2>configuration</h2><pre>{html.escape(config)}</pre></body></html>"
    )
