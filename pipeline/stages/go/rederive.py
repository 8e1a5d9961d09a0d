"""Re-derive `go_runs` events from the raw traces stored in `go_traces`, without re-running the programs.

`go_harness parse` runs on the host (the harness is ours, the trace is data): a newer event mapping or
another event cap applies to an existing dataset (`tracegen rederive-go`). `stored_transitions` reads a
stored trace unfiltered instead (`go_harness transitions`: every goroutine, the runtime's ids), for the
weave export's runtime view.
"""

import hashlib
import json
import subprocess
import tempfile
from contextlib import contextmanager

import zstandard

from pipeline.stages.go import build as go_build
from pipeline.stages.go.harness_output import (
    canonical_ids,
    parse_trace_output,
    renumber,
    renumber_leaked,
    run_gpaths,
)
from pipeline.stages.go.runs import is_complete


@contextmanager
def stored_trace_file(trace: dict):
    """The raw trace of one go_traces row, decompressed and checked against its sha256, as a temporary file."""
    data = zstandard.ZstdDecompressor().decompress(trace["trace_zstd"], max_output_size=trace["trace_bytes"])
    if hashlib.sha256(data).hexdigest() != trace["trace_sha256"]:
        raise ValueError(f"{trace['program_id']} run {trace['run_index']}: the stored trace does not match its sha256")
    with tempfile.NamedTemporaryFile(suffix=".trace") as handle:
        handle.write(data)
        handle.flush()
        yield handle.name


def stored_transitions(trace: dict, harness: str, timeout_s: float = 300.0) -> tuple[list[dict], dict]:
    """(every goroutine transition, the trailer) of one go_traces row, from `go_harness transitions`
    (go_harness/README.md): all goroutines with the runtime's ids, status records included, unfolded."""
    with stored_trace_file(trace) as path:
        done = subprocess.run(
            [harness, "transitions", "-trace", path], capture_output=True, timeout=timeout_s, check=False
        )
    if done.returncode != 0:
        raise ValueError(f"go_harness transitions failed: {done.stderr.decode('utf-8', 'replace')[-500:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    if not lines or lines[-1].get("end") is not True or lines[-1]["n_transitions"] != len(lines) - 1:
        raise ValueError(f"{trace['program_id']} run {trace['run_index']}: go_harness transitions output is cut short")
    return lines[:-1], lines[-1]


def parse_stored_trace(trace: dict, harness: str, *, max_events: int | None = None, timeout_s: float = 300.0) -> dict:
    """Re-parse one go_traces row with `go_harness parse` (on the host: the harness is ours, the trace
    is data). `max_events` overrides the stored cap."""
    cap = max_events or trace["max_events"]
    with stored_trace_file(trace) as path:
        done = subprocess.run(
            [
                harness,
                "parse",
                "-trace",
                path,
                "-max-events",
                str(cap),
                "-mode",
                trace["mode"],
                "-file-prefix",
                trace["file_prefix"],
            ],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    if done.returncode != 0:
        raise ValueError(f"go_harness parse failed: {done.stderr.decode('utf-8', 'replace')[-500:]}")
    return parse_trace_output(done.stdout, cap)


def rederive_runs(
    run_rows: list[dict], trace_rows: list[dict], harness: str | None = None, max_events: int | None = None
) -> list[dict]:
    """One program's go_runs rows with events (and goroutine summaries, truncation, trace error)
    re-derived from its stored raw traces by the current harness; rows without a stored trace keep
    their events, renumbered with the new program-wide ids. With an unchanged harness and cap the
    result equals the stored rows.

    Truncated runs keep their stored goroutine summaries: `go_harness run` stops reading a trace at the
    cap (final states are where reading stopped, goroutines created later are not listed) while
    `go_harness parse` reads to the end."""
    harness = harness or go_build.ensure_harness()[0]
    parsed = {trace["run_index"]: parse_stored_trace(trace, harness, max_events=max_events) for trace in trace_rows}
    summaries, ids = _program_ids(run_rows, parsed)
    rows = []
    for row in run_rows:
        source = parsed.get(row["run_index"])
        if source is None:
            # Already program-canonical: old ids map to paths, paths to the new ids.
            events, goroutines = renumber(row["events"], row["goroutines"], ids)
            rows.append(
                {**row, "events": events, "goroutines": goroutines, "leaked": renumber_leaked(row["leaked"], ids)}
            )
        else:
            rows.append(_rederived(row, source, summaries[row["run_index"]], ids))
    return rows


def _program_ids(run_rows: list[dict], parsed: dict[int, dict]) -> tuple[dict[int, list | None], dict]:
    """The goroutine summaries each re-parsed run keeps (a truncated run's stored ones, else None: the
    parse's), and the program-wide goroutine ids over every run's paths."""
    summaries = {}
    gpaths = set()
    for row in run_rows:
        source = parsed.get(row["run_index"])
        if source is None:
            gpaths |= run_gpaths(row)
            continue
        summaries[row["run_index"]] = row["goroutines"] if source["truncated"] else None
        gpaths |= {e["gpath"] for e in source["events"]}
        gpaths |= {g["gpath"] for g in summaries[row["run_index"]] or source["goroutines"]}
    return summaries, canonical_ids(gpaths)


def _rederived(row: dict, source: dict, summary: list | None, ids: dict) -> dict:
    """A run's row with the events, goroutines, truncation and trace error `go_harness parse` gave (`summary`:
    the stored goroutine summaries it keeps), renumbered with the program's ids, and `complete` again."""
    events, goroutines = renumber(source["events"], source["goroutines"], ids)
    if summary is not None:
        goroutines = renumber([], summary, ids)[1]
    updated = {
        **row,
        "events": events,
        "goroutines": goroutines,
        "leaked": renumber_leaked(row["leaked"], ids),
        "generations": source["generations"],
        "n_events": len(events),
        "truncated": source["truncated"],
        "trace_error": source["trace_error"] or None,
    }
    updated["complete"] = is_complete(
        {
            **row,
            "truncated": updated["truncated"],
            "trace_error": source["trace_error"],
            "generations": source["generations"],
            "trace_file": "stored",
            "stderr_tail": row["stderr_tail"] or "",
            "stdout_tail": row["stdout_tail"] or "",
        }
    )
    return updated
