"""Cut function-level `traces` rows out of a parsed test stream: one per entry call, identical traces once."""

import hashlib
import inspect
import os
import stat
import time
import tokenize
from collections.abc import Callable

from pipeline.engine.failures import Failure
from pipeline.engine.stats import StageCounters
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.stream import ParsedStream, ParsedTest
from pipeline.stages.repos.suite_run import RepoTraceSettings
from pipeline.stages.tracefile import TraceFormatError, json_bytes, require


def cut_entry(events: list[dict], entry: dict) -> list[dict]:
    """The entry's events, re-indexed from 0, frames renumbered (entry = 0), depth relative to it. A generator
    entry's `ranges` (one per activation of its frame) are concatenated: its frame is frame 0 with no parent in
    each, and each range's depth is relative to its own first event (a generator may be resumed from another
    depth than it was called from). An event that none of that changes (a test's first entry, called from
    outside the repository) is kept as it is."""
    root = events[entry["start"]]["frame_id"]
    ids: dict[int, int] = {}
    out: list[dict] = []
    for start, n in entry.get("ranges") or ((entry["start"], entry["n"]),):
        span = events[start : start + n]
        base = span[0]["depth"]
        for event in span:
            index = len(out)
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


MAX_SOURCE_BYTES = 8 << 20  # a larger file is not read: its functions' code is ""
SOURCE_BUDGET = 128 << 20  # characters read from files plus characters tokenized, per repository run
FILE_CACHE_CHARS = 64 << 20  # the most recently used files' text kept, for the next blocks of each
ROW_TEXT_BUDGET = 256 << 20  # characters of the text rows repeat (code, test id) over one repository run
BATCH_ROWS = 256  # an emitted batch of rows holds at most this many rows ...
BATCH_EVENTS = 1 << 16  # ... or about this many events


class SourceReader:
    """Function source text from the worktree, by (path, first line): `inspect.getblock` of the file's lines
    from there, or the first line alone where tokenizing fails. Cached.

    The stream picks which (path, line) pairs are read, and it is untrusted: the work is bounded. A file over
    MAX_SOURCE_BYTES is not read; every character read from a file or handed to the tokenizer is taken from a
    budget of SOURCE_BUDGET, and once it is spent no file is read (code "") and no block tokenized (code: its
    first line). An ordinary suite spends a few MB of it."""

    def __init__(self, worktree: str, budget: int = SOURCE_BUDGET):
        self.root = os.path.realpath(worktree)
        self.budget = budget
        self._files: dict[str, tuple[list[str], int]] = {}  # path -> (lines, characters), least recent first
        self._cached_chars = 0
        self._blocks: dict[tuple[str, int], str] = {}

    def block(self, path: str, firstlineno: int) -> str:
        key = (path, firstlineno)
        text = self._blocks.get(key)
        if text is None:
            lines = self._lines(path)
            text = self._blocks[key] = self._block(lines, firstlineno - 1) if 0 < firstlineno <= len(lines) else ""
        return text

    def _block(self, lines: list[str], start: int) -> str:
        """What `"".join(inspect.getblock(lines[start:]))` gives, reading (and paying for) only the lines the
        tokenizer asks for; the first line alone when tokenizing fails or the budget is spent."""
        if self.budget <= 0:
            return lines[start]
        position = start

        def readline() -> str:
            nonlocal position
            if position == len(lines) or self.budget <= 0:
                return ""
            line = lines[position]
            position += 1
            self.budget -= len(line)
            return line

        finder = inspect.BlockFinder()
        try:
            for token in tokenize.generate_tokens(readline):
                finder.tokeneater(*token)
        except (inspect.EndOfBlock, IndentationError):
            pass
        except Exception:  # tokenize errors: the first line
            return lines[start]
        return "".join(lines[start : start + finder.last])

    def _lines(self, path: str) -> list[str]:
        cached = self._files.pop(path, None)
        if cached is None:
            cached = self._read(path)
            self._cached_chars += cached[1]
        self._files[path] = cached
        while self._cached_chars > FILE_CACHE_CHARS and len(self._files) > 1:
            self._cached_chars -= self._files.pop(next(iter(self._files)))[1]
        return cached[0]

    def _read(self, path: str) -> tuple[list[str], int]:
        """The file's lines and characters; none for a file outside the worktree, missing, or too large."""
        full = os.path.realpath(os.path.join(self.root, path))
        if self.budget <= 0 or not full.startswith(self.root + os.sep):
            return [], 0
        try:
            found = os.stat(full)
        except OSError:
            return [], 0
        if not stat.S_ISREG(found.st_mode) or found.st_size > MAX_SOURCE_BYTES:
            return [], 0
        with open(full, encoding="utf-8", errors="replace") as handle:
            text = handle.read()  # the sandbox has the worktree read-only: it is still that size
        self.budget -= len(text)
        return text.splitlines(keepends=True), len(text)


class EntryCutter:
    """Called with each parsed test: cuts its entries into `traces` rows, identical traces once.

    With `emit`, rows leave in batches (BATCH_ROWS rows or BATCH_EVENTS events, whichever comes first; the
    last at `finish`) so a repository's traces are never held at once; without it `finish` returns them all."""

    def __init__(
        self,
        spec: RepoSpec,
        checkout,
        settings: RepoTraceSettings,
        counter: StageCounters,
        baseline: dict[str, str | None] | None = None,
        row_text_budget: int = ROW_TEXT_BUDGET,
        emit: Callable[[list[dict]], None] | None = None,
    ):
        """`baseline`: each test's outcome in the untraced run (None: no parity run); a trace is `perturbed`
        when its test ended otherwise there, unknown (null) when that run did not finish the test.
        `row_text_budget`: characters of the text every row of an entry repeats from elsewhere (its function's
        `code`, its test's id) over the rows: a stream of many small entries of one long function, or of one
        test with a long id, must not make rows far larger than itself; an entry past it is dropped, and
        reported once."""
        self.spec, self.checkout, self.counter = spec, checkout, counter
        self.baseline = baseline
        self.repr_mode = settings.reprs.mode
        self.max_events = spec.max_events or settings.max_events
        self.sources = SourceReader(checkout.path)
        self.row_text_budget = self.row_text_left = row_text_budget
        self.over_row_text_budget = 0
        self.emit = emit
        self.batch: list[dict] = []
        self.batch_events = 0
        self.n_rows = self.n_events = 0
        self.bad: list[str] = []
        self.seen: set[str] = set()
        self.seconds = 0.0
        self.traced_tests: set[str] = set()  # tests with an entry cut (stored, or identical to a stored one)

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
            self.traced_tests.add(test.nodeid)
            code = self.sources.block(entry["path"], entry["firstlineno"])
            trace_id = repo_trace_id(entry["path"], entry["qualname"], code, entry["input"], entry["exit"], events)
            if trace_id in self.seen:
                self.counter.drop("duplicate")
                continue
            repeated = len(code) + len(test.nodeid)
            if repeated > self.row_text_left:
                self.over_row_text_budget += 1
                continue
            self.row_text_left -= repeated
            self.seen.add(trace_id)
            self.n_rows += 1
            self.n_events += len(events)
            self.batch_events += len(events)
            self.batch.append(self._row(test.nodeid, entry, trace_id, code, events, (python, version), perturbed))
            if self.emit is not None and (len(self.batch) >= BATCH_ROWS or self.batch_events >= BATCH_EVENTS):
                self._clock(start)
                self._flush(self.emit)  # sampling and writing: their own stages' time, and not the trace's
                start = time.perf_counter()
        self._clock(start)

    def _row(self, test_id, entry, trace_id, code, events, versions: tuple[str, str], perturbed) -> dict:
        """The `traces` row of an entry cut from test `test_id` (`versions`: the run's Python and tracer)."""
        python, version = versions
        return {
            "trace_id": trace_id,
            "source_id": f"{self.spec.name}@{self.checkout.commit}:{entry['path']}:{entry['qualname']}",
            "source_kind": "repo",
            "repo_url": self.checkout.url,
            "commit": self.checkout.commit,
            "path": entry["path"],
            "qualname": entry["qualname"],
            "test_id": test_id,
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

    def _clock(self, start: float) -> None:
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        self.counter.seconds += elapsed

    def _flush(self, emit: Callable[[list[dict]], None]) -> None:
        start = time.perf_counter()
        batch, self.batch, self.batch_events = self.batch, [], 0
        emit(batch)
        self.seconds += time.perf_counter() - start  # `seconds`: all the time the run's parse spent here

    def finish(self) -> tuple[list[dict], list[Failure]]:
        """The rows not emitted (all of them without `emit`), and a failure for each kind of entry dropped."""
        failures = []
        if self.bad:
            self.counter.drop("BadEntry", len(self.bad))
            failures.append(
                Failure(
                    "parse",
                    "BadEntry",
                    f"{len(self.bad)} entries could not be cut from the stream; first: {self.bad[0]}",
                )
            )
        if self.over_row_text_budget:
            self.counter.drop("RowTextBudget", self.over_row_text_budget)
            failures.append(
                Failure(
                    "parse",
                    "RowTextBudget",
                    f"{self.over_row_text_budget} entries dropped: the function source and test ids their rows "
                    f"repeat passed {self.row_text_budget:,} characters in all (many entries of long functions or "
                    f"of tests with long ids; trace fewer tests per run, or fewer distinct inputs)",
                )
            )
        self.counter.n_out = self.n_rows
        self.counter.events = self.n_events
        if self.emit is not None and self.batch:
            self._flush(self.emit)
        return self.batch, failures
