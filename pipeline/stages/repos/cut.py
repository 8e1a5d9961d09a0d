"""Cut function-level `traces` rows out of a parsed test stream: one per entry call, identical traces once."""

import hashlib
import inspect
import os
import time

from pipeline.engine.stats import StageCounters
from pipeline.sources.repos import RepoSpec
from pipeline.stages.repos.run import RepoTraceSettings
from pipeline.stages.repos.stream import ParsedStream, ParsedTest
from pipeline.stages.tracefile import TraceFormatError, json_bytes, require


def cut_entry(events: list[dict], entry: dict) -> list[dict]:
    """The entry's events, re-indexed from 0, frames renumbered (entry = 0), depth relative to it. An event
    that none of that changes (a test's first entry, called from outside the repository) is kept as it is."""
    start = entry["start"]
    span = events[start : start + entry["n"]]
    root, base = span[0]["frame_id"], span[0]["depth"]
    ids: dict[int, int] = {}
    out = []
    for index, event in enumerate(span):
        frame = event["frame_id"]
        if frame == root:
            parent = None
        else:
            parent = ids.get(event["parent_frame_id"])
            if parent is None or event["depth"] <= base:
                raise TraceFormatError(f"event {index}: its caller is outside the entry")
        new_id = ids.setdefault(frame, len(ids))
        if new_id == frame and parent == event["parent_frame_id"] and index == event["index"] and not base:
            out.append(event)
            continue
        out.append(
            {
                "index": index,
                "event": event["event"],
                "frame_id": new_id,
                "parent_frame_id": parent,
                "depth": event["depth"] - base,
                "lineno": event["lineno"],
                "function": event["function"],
                "source": event["source"],
                "locals": event["locals"],
                "arg": event["arg"],
            }
        )
    return out


def repo_trace_id(path: str, qualname: str, code: str, input_: str, exit_: str, events: list[dict]) -> str:
    """Content hash of the function and what happened (not of the test, the repository or the commit).

    Events are dicts built by `cut_entry` in one fixed key order, so no key sorting is needed."""
    return hashlib.sha256(json_bytes([path, qualname, code, input_, exit_, events])).hexdigest()[:32]


class SourceReader:
    """Function source text from the worktree, by (path, first line); cached."""

    def __init__(self, worktree: str):
        self.root = os.path.realpath(worktree)
        self._files: dict[str, list[str]] = {}
        self._blocks: dict[tuple[str, int], str] = {}

    def block(self, path: str, firstlineno: int) -> str:
        key = (path, firstlineno)
        if key not in self._blocks:
            lines = self._lines(path)
            text = ""
            if 0 < firstlineno <= len(lines):
                try:
                    text = "".join(inspect.getblock(lines[firstlineno - 1 :]))
                except Exception:  # tokenize errors: fall back to the def line
                    text = lines[firstlineno - 1]
            self._blocks[key] = text
        return self._blocks[key]

    def _lines(self, path: str) -> list[str]:
        if path not in self._files:
            full = os.path.realpath(os.path.join(self.root, path))
            lines: list[str] = []
            if full.startswith(self.root + os.sep) and os.path.isfile(full):
                with open(full, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines(keepends=True)
            self._files[path] = lines
        return self._files[path]


class EntryCutter:
    """Called with each parsed test: cuts its entries into `traces` rows, identical traces once."""

    def __init__(
        self,
        spec: RepoSpec,
        checkout,
        settings: RepoTraceSettings,
        counter: StageCounters,
        baseline: dict[str, str | None] | None = None,
    ):
        """`baseline`: each test's outcome in the untraced run (None: no parity run); a trace is `perturbed`
        when its test ended otherwise there, unknown (null) when that run did not finish the test."""
        self.spec, self.checkout, self.counter = spec, checkout, counter
        self.baseline = baseline
        self.repr_mode = settings.reprs.mode
        self.max_events = spec.max_events or settings.max_events
        self.sources = SourceReader(checkout.path)
        self.rows: list[dict] = []
        self.bad: list[str] = []
        self.seen: set[str] = set()
        self.seconds = 0.0

    def __call__(self, stream: ParsedStream, test: ParsedTest) -> None:
        start = time.perf_counter()
        header = stream.header or {}
        python, version = str(header.get("python"))[:20], str(header.get("tracer_version"))[:20]
        perturbed = None
        if self.baseline is not None and self.baseline.get(test.nodeid) is not None and test.outcome is not None:
            perturbed = self.baseline[test.nodeid] != test.outcome
        for entry in test.entries:
            self.counter.n_in += 1
            try:
                require(entry["n"] <= self.max_events, f"{entry['n']} events, over max_events={self.max_events}")
                events = cut_entry(test.events, entry)
            except TraceFormatError as error:
                self.bad.append(f"{test.nodeid} {entry['qualname']}: {error}")
                continue
            code = self.sources.block(entry["path"], entry["firstlineno"])
            trace_id = repo_trace_id(entry["path"], entry["qualname"], code, entry["input"], entry["exit"], events)
            if trace_id in self.seen:
                self.counter.drop("duplicate")
                continue
            self.seen.add(trace_id)
            self.rows.append(
                {
                    "trace_id": trace_id,
                    "source_id": f"{self.spec.name}@{self.checkout.commit}:{entry['path']}:{entry['qualname']}",
                    "source_kind": "repo",
                    "repo_url": self.spec.url,
                    "commit": self.checkout.commit,
                    "path": entry["path"],
                    "qualname": entry["qualname"],
                    "test_id": test.nodeid,
                    "code": code,
                    "input": entry["input"],
                    "python_version": python,
                    "tracer_version": version,
                    "exit": entry["exit"],
                    "truncated": entry["truncated"],
                    "truncation_reason": entry["reason"] if entry["truncated"] else None,
                    "n_events": len(events),
                    "n_capped_values": entry.get("capped", 0),
                    "events": events,
                    "repr_mode": self.repr_mode,
                    "perturbed": perturbed,
                }
            )
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        self.counter.seconds += elapsed

    def finish(self, fail) -> list[dict]:
        if self.bad:
            self.counter.drop("BadEntry", len(self.bad))
            fail(
                "parse",
                "BadEntry",
                f"repository {self.spec.name!r}: {len(self.bad)} entries could not be cut "
                f"from the stream; first: {self.bad[0]}",
            )
        self.counter.n_out = len(self.rows)
        self.counter.events = sum(row["n_events"] for row in self.rows)
        return self.rows
