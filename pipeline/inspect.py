"""`tracegen inspect OUT`: what a dataset holds, read with polars from the manifest's shard list."""

import json
import posixpath
from collections import Counter
from collections.abc import Iterator

import polars as pl
import pyarrow.fs as pafs

from pipeline.debugger.trajectory_summary import TrajectoryReport
from pipeline.engine.reader import (
    Dataset,
    committed_versions,
    log_entry,
    open_dataset,
    open_root,
    shard_count,
    shard_file,
    shard_row_groups,
)
from schemas.fields import named_pairs


def _open(out: str) -> Dataset:
    return open_dataset(out, f"run a tracegen job with --out {out}")


def load_table(out: str, table: str) -> pl.DataFrame | None:
    """All shards of `table` listed in the manifest (never a directory listing), or None if empty."""
    dataset = _open(out)
    paths = dataset.paths(table)
    if not paths:
        return None
    frames = []
    for path in paths:
        with dataset.open(path) as source:
            frames.append(pl.read_parquet(source))
    return pl.concat(frames)


def row_groups(out: str, table: str, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """`table`'s rows one Parquet row group at a time (shards in manifest order), for reports that must not
    hold a large table at once."""
    dataset = _open(out)
    for group in shard_row_groups(dataset.uri, dataset.paths(table), columns):
        frame = pl.from_arrow(group)
        assert isinstance(frame, pl.DataFrame)
        yield frame


def counts(frame: pl.DataFrame, *columns: str) -> list[tuple]:
    rows = frame.group_by(list(columns)).len().sort(["len", *columns], descending=[True] + [False] * len(columns))
    return [tuple(row) for row in rows.iter_rows()]


def summarize(out: str, *, examples: int = 1) -> str:
    """A human-readable report: tables, exits, failures by reason, events, one decoded trace. `out` is a
    dataset directory, or a versioned root (its versions are listed; the latest is summarised)."""
    dataset = _open(out)
    manifest, root = dataset.manifest, dataset.root
    lines = [
        f"dataset {out}  (config {manifest['config_hash']}, code {manifest['code_version']}, "
        f"created {manifest['created']})",
    ]
    versions = _version_lines(*open_root(out))
    if versions:
        lines += ["", f"versions (latest: {root}):", *versions]
    lines += ["", "tables:"]
    empty = [name for name, table in manifest["tables"].items() if not table["rows"]]
    for name, table in manifest["tables"].items():
        if table["rows"]:
            lines.append(
                f"  {name:<14} {table['rows']:>8} rows  {shard_count(table):>4} shards  "
                f"{table['bytes'] / 1e6:>8.2f} MB  {_shard_dirs(root, dataset.shards(name))}"
            )
    if empty:
        lines.append(f"  (no rows: {', '.join(empty)})")
    traces, mix, examples_found = _scan_traces(out, examples)
    if traces is not None:
        lines += ["", "traces by exit:"]
        lines += [
            f"  {exit_:<8} truncated={truncated!s:<5} {n:>6}"
            for exit_, truncated, n in counts(traces, "exit", "truncated")
        ]
        lengths = traces["n_events"]
        lines.append(
            f"events per trace: min {lengths.min()}  median {lengths.median():.0f}  "
            f"max {lengths.max()}  total {lengths.sum()}"
        )
        lines.append("event mix: " + "  ".join(f"{kind} {n}" for kind, n in sorted(mix.items(), key=_by_count)))
        lines += _parity_report(traces, manifest.get("stats") or {})
    lines += _repo_report(out)
    lines += _go_report(out)
    lines += _contaminated_report(out, manifest)
    failures = load_table(out, "failures")
    lines += ["", "failures by stage and reason:"]
    if failures is None:
        lines.append("  none")
    else:
        lines += [f"  {stage:<10} {error:<22} {n:>5}" for stage, error, n in counts(failures, "stage", "error_type")]
    report = TrajectoryReport(examples)
    for group in row_groups(
        out, "trajectories", ["trace_id", "direction", "exit", "actions", "states", "n_tokens", "text"]
    ):
        for part in group.iter_slices(1024):  # as Python objects, a row group's text is several times its size
            report.add(part.to_dicts())
    if report.lengths:
        lines += ["", *report.lines()]
    for row in examples_found:
        lines += ["", f"example trace {row['source_id']} (exit {row['exit']}, {row['n_events']} events):"]
        lines += [decode_event(event) for event in row["events"]]
    stats = manifest.get("stats") or {}
    if stats:
        lines += ["", "stages:"]
        for stage, values in stats.items():
            dropped = ", ".join(f"{k} {v}" for k, v in values["dropped"].items()) or "-"
            lines.append(
                f"  {stage:<12} in {values['in']:>6}  out {values['out']:>6}  "
                f"{values['seconds']:>8.2f}s  dropped: {dropped}"
            )
    return "\n".join(lines)


def cleaned_against(config: dict) -> list[dict]:
    """The benchmark files ({path, sha256}) a dataset's config says it was cleaned against (`--decontaminate`):
    a kind's own config, or each kind's in a refresh's."""
    configs = [config, *(value for value in config.values() if isinstance(value, dict))]
    found = [b for c in configs for b in (c.get("decontaminate") or {}).get("benchmarks", [])]
    return [dict(pair) for pair in dict.fromkeys(tuple(sorted(b.items())) for b in found)]


def contaminated_counts(out: str, manifest: dict) -> list[tuple[str, str, int, str]]:
    """(benchmark path, sha256, rows dropped, by rule) per benchmark file the dataset was cleaned against, and
    per file its `contaminated` rows name (inspect, report)."""
    table = load_table(out, "contaminated")
    by_file: dict[tuple[str, str], Counter] = {
        (b["path"], b["sha256"]): Counter() for b in cleaned_against(manifest["config"])
    }
    if table is not None:
        for path, sha256, rule, n in counts(table, "benchmark", "benchmark_sha256", "rule"):
            by_file.setdefault((path, sha256), Counter())[rule] += n
    return [
        (path, sha256, sum(rules.values()), ", ".join(f"{rule} {n}" for rule, n in sorted(rules.items())))
        for (path, sha256), rules in by_file.items()
    ]


def _contaminated_report(out: str, manifest: dict) -> list[str]:
    """What `--decontaminate` dropped, per benchmark file; nothing when the dataset was not cleaned."""
    per_file = contaminated_counts(out, manifest)
    if not per_file:
        return []
    lines = [
        "",
        f"contaminated: {sum(n for _, _, n, _ in per_file)} dropped, against {len(per_file)} benchmark file(s):",
    ]
    lines += [f"  {path} (sha256 {sha256[:12]}): {n}  {rules or '-'}" for path, sha256, n, rules in per_file]
    return lines


def _version_lines(fs: pafs.FileSystem, root: str) -> list[str]:
    """One line per committed version of the versioned root `root`: number, created, what it added/dropped."""
    lines = []
    for n in committed_versions(fs, root):
        entry = log_entry(fs, root, n) or {}
        added = sum((entry.get("added") or {}).values())
        dropped = sum((entry.get("dropped") or {}).values())
        lines.append(
            f"  {n:>4}  {entry.get('created', '?'):<25}  units {entry.get('units_run', 0)} run, "
            f"{entry.get('units_reused', 0)} reused  rows +{added} -{dropped}"
        )
    return lines


def _shard_dirs(root: str, shards: list[dict]) -> str:
    """Where a table's shards are: one directory, or (a refreshed version) its own and earlier versions'."""
    dirs = sorted({posixpath.dirname(shard_file(root, shard["path"])) for shard in shards})
    return f"{dirs[0]}/*.parquet" if len(dirs) == 1 else f"{', '.join(dirs)} (the manifest lists each shard)"


def _parity_report(traces: pl.DataFrame, stats: dict) -> list[str]:
    """Outcome parity: tests (repositories) with the same outcome untraced, and traces flagged perturbed."""
    lines = []
    parity = stats.get("parity")
    if parity and parity["in"]:
        unchecked = parity["dropped"].get("unchecked", 0)
        lines.append(
            f"parity: {parity['out']} of {parity['in']} tests end the same traced and untraced "
            f"({100 * parity['out'] / parity['in']:.1f}%)" + (f", {unchecked} unchecked" if unchecked else "")
        )
    if "perturbed" in traces.columns:
        checked = traces.filter(pl.col("perturbed").is_not_null())
        if checked.height:
            flagged = int(checked["perturbed"].sum())
            lines.append(f"perturbed traces: {flagged} of {checked.height} checked ({traces.height} in all)")
    if "repr_mode" in traces.columns:
        lines.append("values rendered: " + "  ".join(f"{mode} {n}" for mode, n in counts(traces, "repr_mode")))
    return lines


REPO_COUNTS = ("tests_collected", "tests_passed_untraced", "tests_passed_traced", "tests_traced")


def _repo_report(out: str) -> list[str]:
    """The yield per repository (`repo_runs`): how it installed, its tests, its top failure types."""
    runs = load_table(out, "repo_runs")
    if runs is None:
        return []
    lines = ["", "repositories: tests collected / passed untraced / passed traced / traced (traced ÷ passed untraced)"]
    for row in runs.sort("unit_id").iter_rows(named=True):
        label = row["name"] + (f" {row['piece']}" if row.get("piece") else "")
        lines.append(f"  {label:<20} {repo_line(row)}")
    passed = int(runs["tests_passed_untraced"].drop_nulls().sum())
    traced = int(runs.filter(pl.col("tests_passed_untraced").is_not_null())["tests_traced"].fill_null(0).sum())
    with_traces, repos = runs.filter(pl.col("traces") > 0)["name"].n_unique(), runs["name"].n_unique()
    lines.append(
        f"  {with_traces} of {repos} repositories with traces; tests traced {traced} of {passed} passing "
        f"untraced" + (f" ({100 * traced / passed:.1f}%)" if passed else "")
    )
    return lines


def repo_line(row: dict) -> str:
    """One repository's `repo_runs` row as text (inspect, report)."""

    def count(name: str) -> str:
        return "-" if row[name] is None else str(row[name])

    how = row["install_step"] or "not installed"
    if row["editable"]:
        how += ", editable"
    if row.get("install_commands"):
        how += f", prepared ({len(row['install_commands'])} commands_pre)"
    if row["repaired_modules"]:
        how += ", repaired " + " ".join(row["repaired_modules"])
    ratio = ""
    if row["tests_passed_untraced"] and row["tests_traced"] is not None:
        ratio = f" ({100 * row['tests_traced'] / row['tests_passed_untraced']:.0f}%)"
    failures = ", ".join(f"{item['error_type']} {item['n']}" for item in row["top_failures"]) or "-"
    tests = " / ".join(count(name) for name in REPO_COUNTS)
    return f"{tests}{ratio}  {row['traces']} traces  installed: {how}  failures: {failures}"


def _go_report(out: str) -> list[str]:
    """Go runs by status, and where the scheduler's next event was most uncertain."""
    runs = load_table(out, "go_runs")
    if runs is None:
        return []
    lines = ["", "go runs by status:"]
    lines += [f"  {status:<12} {n:>6}" for status, n in counts(runs, "status")]
    lines.append(f"events per run: median {runs['n_events'].median():.0f}  max {runs['n_events'].max()}")
    kinds = runs.select(pl.col("events").explode().struct.field("event")).drop_nulls()
    annotations = counts(kinds.filter(pl.col("event").str.starts_with("User")), "event")
    if annotations:
        lines.append("user annotations: " + "  ".join(f"{kind} {n}" for kind, n in annotations))
    programs = load_table(out, "go_programs")
    if programs is not None:
        lines.append(
            f"programs: {programs.height} with sources  (timeouts: "
            + ", ".join(f"{source} {n}" for source, n in counts(programs, "timeout_source"))
            + ")"
        )
    ran = runs.filter(pl.col("run_index") >= 0)
    incomplete = ran.filter(~pl.col("complete"))
    lines.append(
        f"incomplete runs (censored in go_next_event): {incomplete.height} of {ran.height}"
        + (f"  ({', '.join(f'{s} {n}' for s, n in counts(incomplete, 'status'))})" if incomplete.height else "")
    )
    next_event = load_table(out, "go_next_event")
    lines += _leak_report(runs, next_event)
    if next_event is not None:
        lines.append("next-event rows by prefix kind (mean entropy, bits):")
        summary = next_event.group_by("prefix_kind").agg(pl.len(), pl.col("entropy").mean()).sort("prefix_kind")
        lines += [f"  {kind:<16} {n:>7} rows  {entropy:.3f}" for kind, n, entropy in summary.iter_rows()]
        top = next_event.sort(["entropy", "program_id", "depth"], descending=[True, False, False]).row(0, named=True)
        probs = "  ".join(f"{name} {p:.2f}" for name, p in top["probs"].items() if p > 0)
        lines.append(
            f"most uncertain: {top['program_id']} {top['prefix_kind']} depth {top['depth']} "
            f"(n={top['n']}, {top['entropy']:.2f} bits): {probs}"
        )
    return lines


def _leak_report(runs: pl.DataFrame, next_event: pl.DataFrame | None) -> list[str]:
    """Goroutines leaked on a select, each with P(GoUnblock) once blocked there (goroutine_exact rows)."""
    leaked = (
        runs.select("program_id", "leaked")
        .explode("leaked")
        .drop_nulls("leaked")
        .unnest("leaked")
        .filter(pl.col("reason") == "select")
        .group_by("program_id", "gpath")
        .len()
        .sort("program_id", "gpath")
    )
    if leaked.is_empty():
        return []
    lines = [f"goroutines leaked on select: {leaked.height}"]
    for program, gpath, n_runs in leaked.iter_rows():
        blocked = (
            pl.DataFrame()
            if next_event is None
            else next_event.filter(
                (pl.col("program_id") == program)
                & (pl.col("gpath") == gpath)
                & (pl.col("prefix_kind") == "goroutine_exact")
                & pl.col("state").str.starts_with("blocked(select")  # with or without the offered channels
            )
        )
        if blocked.is_empty():
            lines.append(f"  {program} goroutine {gpath}: leaked in {n_runs} runs; no shared blocked prefix")
            continue
        unblocked = int(blocked["counts"].struct.field("GoUnblock").sum())
        total = int(blocked["n"].sum())
        lines.append(
            f"  {program} goroutine {gpath}: leaked in {n_runs} runs; P(GoUnblock | blocked on select) "
            f"= {unblocked}/{total} = {unblocked / total:.2f}"
        )
    return lines


TRACE_SUMMARY = ["trace_id", "source_id", "exit", "truncated", "n_events", "perturbed", "repr_mode"]


def _scan_traces(out: str, n: int) -> tuple[pl.DataFrame | None, Counter, list[dict]]:
    """One pass over `traces`, a row group at a time: (the summary columns of every row, the event mix, the
    `n` example traces in full), so the events of a large dataset are never held at once. The examples are kept
    as the pass goes: the best `n` of what was kept and the next row group are the best `n` so far."""
    summary, mix, examples = [], Counter(), None
    for group in row_groups(out, "traces"):
        summary.append(group.select(TRACE_SUMMARY))
        kinds = group.select(pl.col("events").list.eval(pl.element().struct.field("event"))).explode("events")
        mix.update(dict(kinds["events"].drop_nulls().value_counts().iter_rows()))
        examples = _example_traces(group if examples is None else pl.concat([examples, group]), n)
    if examples is None:
        return None, mix, []
    return pl.concat(summary), mix, examples.to_dicts()


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _example_traces(traces: pl.DataFrame, n: int) -> pl.DataFrame:
    """Short normal traces with nested calls first: the most instructive to read."""
    candidates = traces.filter((pl.col("exit") == "normal") & pl.col("n_events").is_between(8, 40))
    if candidates.is_empty():
        candidates = traces
    return candidates.sort(["n_events", "source_id"]).head(n)


def decode_event(event: dict) -> str:
    """One event as a line: index, indentation by depth, event, line, source, locals, arg."""
    local_text = json.dumps(dict(named_pairs(event["locals"])), ensure_ascii=False)
    arg = f"  -> {event['arg']}" if event["arg"] is not None else ""
    return (
        f"  {event['index']:>4} {'  ' * event['depth']}{event['event']:<9} {event['function']}:"
        f"{event['lineno']:<4} {event['source'].strip():<36} {local_text}{arg}"
    )
