"""`tracegen report ROOT|VERSION_DIR`: report.html and PNG plots beside a version's manifest.

Plots (matplotlib, Agg backend: no display or browser needed), each drawn only when there is data for it:
rows and bytes per table, rows per version, what this version added and dropped, failures by stage and
reason, top failing sources, the yield of each repository (tests traced of those passing untraced), events
per trace, exits, action mix, trajectory token lengths, Go status mix and next-event entropy by program.
Under them, the text `tracegen inspect` prints for the same version (parity rate, per-repository yield,
failures, one decoded trace). matplotlib is imported here only, so a job that writes no report never needs
it.
"""

import html
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow.fs as pafs

from pipeline.engine.reader import committed_versions, log_entry, open_dataset, shard_count
from pipeline.inspect import contaminated_counts, counts, load_table, summarize

SUMMARY_KEYS = ("version", "previous", "units_run", "units_reused", "units_dropped", "added", "dropped", "failed_units")


@dataclass(frozen=True)
class Plot:
    """One figure: a horizontal bar chart of (label, value) pairs, or a histogram of values."""

    name: str
    title: str
    xlabel: str
    bars: Sequence[tuple[object, float]] = ()
    values: Sequence[float] = ()

    def draw(self, plt, path: str) -> None:
        if self.bars:
            labels = [str(label)[:60] for label, _ in self.bars][::-1]
            figure, axes = plt.subplots(figsize=(7, max(2.0, 0.35 * len(labels) + 1)))
            axes.barh(labels, [value for _, value in self.bars][::-1], color="#4472c4")
        else:
            figure, axes = plt.subplots(figsize=(7, 3.5))
            low, high = min(self.values), max(self.values)
            bins = min(40, max(5, len(set(self.values))))
            if low > 0 and high / low > 50:  # heavy-tailed (a few traces hit the event cap): log-spaced bins
                axes.set_xscale("log")
                bins = [low * (high / low) ** (k / bins) for k in range(bins + 1)]
            axes.hist(self.values, bins=bins, color="#70ad47")
            axes.set_ylabel("count")
        axes.set_title(self.title)
        axes.set_xlabel(self.xlabel)
        figure.tight_layout()
        figure.savefig(path, dpi=90)
        plt.close(figure)


def plots(uri: str, manifest: dict, history: list[dict]) -> list[Plot]:
    """Every plot that has data, in report order."""
    out: list[Plot] = []
    tables = sorted((name, t) for name, t in manifest["tables"].items() if t["rows"])
    if tables:
        out.append(Plot("tables_rows.png", "rows per table", "rows", [(n, t["rows"]) for n, t in tables]))
        out.append(Plot("tables_bytes.png", "MB per table", "MB", [(n, t["bytes"] / 1e6) for n, t in tables]))
    if history:
        totals = [(f"v{e['version']}", sum((e.get("rows") or {}).values())) for e in history]
        out.append(Plot("versions_rows.png", "rows per version (all tables)", "rows", totals))
        last = history[-1]
        changes = [(f"+{t}", v) for t, v in (last.get("added") or {}).items()]
        changes += [(f"-{t}", v) for t, v in (last.get("dropped") or {}).items()]
        if changes:
            title = f"v{last['version']} against the previous version"
            out.append(Plot("version_changes.png", title, "rows", changes))
    failures = load_table(uri, "failures")
    if failures is not None:
        reasons = [(f"{stage} {error}", n) for stage, error, n in counts(failures, "stage", "error_type")[:20]]
        out.append(Plot("failures.png", "failures by stage and reason", "rows", reasons))
        named = failures.with_columns(pl.col("source_id").fill_null("(none)"))
        out.append(Plot("failing_sources.png", "top failing sources", "failure rows", counts(named, "source_id")[:15]))
    traces = load_table(uri, "traces")
    if traces is not None:
        out.append(Plot("events_per_trace.png", "events per trace", "events", values=traces["n_events"].to_list()))
        exits = [(f"{e} truncated={t}", n) for e, t, n in counts(traces, "exit", "truncated")]
        out.append(Plot("exits.png", "traces by exit", "traces", exits))
    trajectories = load_table(uri, "trajectories")
    if trajectories is not None:
        actions = trajectories.select(pl.col("actions").list.eval(pl.element().struct.field("action")))
        mix = counts(actions.explode("actions").drop_nulls(), "actions")
        out.append(Plot("action_mix.png", "action mix", "actions", mix))
        tokens = trajectories["n_tokens"].to_list()
        out.append(Plot("trajectory_tokens.png", "trajectory token lengths", "tokens", values=tokens))
    repos = load_table(uri, "repo_runs")
    if repos is not None:
        by_repo = repos.group_by("name").agg(  # the pieces of a split suite together
            pl.col("tests_traced").fill_null(0).sum(), pl.col("tests_passed_untraced").sum()
        )
        traced = by_repo.filter(pl.col("tests_passed_untraced") > 0).sort("name")
        ratios = [
            (name, 100 * (n or 0) / passed)
            for name, n, passed in traced.select("name", "tests_traced", "tests_passed_untraced").iter_rows()
        ]
        title = "tests traced per repository (% of those passing untraced)"
        out.append(Plot("repo_yield.png", title, "% of passing tests", ratios[:40]))
    per_benchmark = [
        (f"{os.path.basename(path)} ({sha256[:8]})", n) for path, sha256, n, _ in contaminated_counts(uri, manifest)
    ]
    if per_benchmark:
        out.append(Plot("contaminated.png", "benchmark copies dropped", "rows", per_benchmark))
    runs = load_table(uri, "go_runs")
    if runs is not None:
        out.append(Plot("go_status.png", "Go runs by status", "runs", counts(runs, "status")))
    next_event = load_table(uri, "go_next_event")
    if next_event is not None:
        entropy = next_event.group_by("program_id").agg(pl.col("entropy").mean()).sort("entropy", descending=True)
        title = "mean next-event entropy by program"
        out.append(Plot("go_entropy.png", title, "bits", list(entropy.head(20).iter_rows())))
    return out


def write_report(uri: str) -> str:
    """Write report.html and its PNGs in the dataset directory `uri` resolves to; returns the HTML's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dataset = open_dataset(uri, "give a versioned root or a dataset directory")
    version_uri, fs, root, manifest = dataset.uri, dataset.fs, dataset.root, dataset.manifest
    history = _history(fs, root, manifest)
    drawn = plots(version_uri, manifest, history)
    with tempfile.TemporaryDirectory(prefix="tracegen-report-") as scratch:
        for plot in drawn:
            local = os.path.join(scratch, plot.name)
            plot.draw(plt, local)
            _copy_out(fs, local, f"{root}/{plot.name}")
    page = _html(version_uri, manifest, history, drawn, summarize(version_uri))
    with fs.open_output_stream(f"{root}/report.html") as sink:
        sink.write(page.encode())
    return f"{root}/report.html"


def _copy_out(fs: pafs.FileSystem, local: str, target: str) -> None:
    with open(local, "rb") as source, fs.open_output_stream(target) as sink:
        sink.write(source.read())


def _history(fs, version_root: str, manifest: dict) -> list[dict]:
    """The log entries up to this version, when it is a version of a versioned root."""
    version = (manifest.get("refresh") or {}).get("version")
    if version is None:
        return []
    root = version_root.rsplit("/versions/", 1)[0]
    return [entry for n in committed_versions(fs, root) if n <= version and (entry := log_entry(fs, root, n))]


def escape(value: object) -> str:
    return html.escape(str(value))


def _html(uri: str, manifest: dict, history: list[dict], drawn: list[Plot], text: str) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{t['rows']}</td><td>{shard_count(t)}</td><td>{t['bytes'] / 1e6:.2f}</td></tr>"
        for name, t in sorted(manifest["tables"].items())
    )
    summary = ""
    if history:
        this = {key: history[-1].get(key) for key in SUMMARY_KEYS}
        summary = f"<p>this version: <code>{escape(json.dumps(this, sort_keys=True))}</code></p>"
    images = "".join(f'<h2>{escape(p.title)}</h2><img src="{escape(p.name)}" alt="{escape(p.title)}">' for p in drawn)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>tracegen report</title>"
        "<style>body{font-family:sans-serif;max-width:900px;margin:auto}td,th{padding:2px 10px;text-align:right}"
        "pre{font-size:12px;overflow-x:auto;background:#f4f4f4;padding:8px}</style>"
        f"</head><body><h1>tracegen dataset {escape(uri)}</h1>"
        f"<p>config {escape(manifest['config_hash'])}, code {escape(manifest['code_version'])}, "
        f"created {escape(manifest['created'])}</p>{summary}"
        f"<table><tr><th>table</th><th>rows</th><th>shards</th><th>MB</th></tr>{rows}</table>{images}"
        f"<h2>tracegen inspect</h2><pre>{escape(text)}</pre></body></html>"
    )
