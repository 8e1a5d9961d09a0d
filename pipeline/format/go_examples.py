"""Go training examples: a program's source, a window on an execution prefix, and the empirical next-event
distribution.

One example per `go_next_event` row of prefix kind `exact` (runs that agree on their first k scheduler
events, so the prefix is one sequence and the distribution is conditional on it). Its text:

    <|go_program|>PROGRAM_ID
    <|go_file|>PATH
    FILE TEXT ...                                         (every file of the program, in go_programs order)
    <|go_events|>[j earlier events left out; goroutines: g1 running, g2 blocked(chan receive); 3 ended]
    <|go_GoCreate|>g1 main.main main.go:9                 (only when j > 0: see "The window" below)
    <|go_GoBlock|>g1 (chan receive) main.main main.go:12   (the prefix's events j..k-1: type token, goroutine,
    ...                                                     reason in parentheses when there is one, the
                                                            frame `function file:line` when there is one)
    <|go_next|><|go_GoUnblock|><|go_end|>

Every payload is escaped as the formal language's (`<|` → `<||`). The token after `<|go_next|>` names the
most frequent next outcome (ties: schema order of `go_next_event.OUTCOMES`) and carries the soft target:
the row's `counts` in `OUTCOMES` order and `n`. It is the example's only loss-masked token in the default mode.

The window. An example never holds more than `seq_len` tokens (a sample's length), so it carries the program's
source, then the most recent events of the prefix that fit with it: events j..k-1, j the first event from which the
rest of the prefix, the goroutine table of that start and the example's four fixed tokens fit in `seq_len`. When
the whole prefix fits, j = 0 and there is no table: the text is the whole prefix, as it always was. Otherwise the
line after `<|go_events|>` says how many events were left out and summarises the state they left: every goroutine
created by then that has not ended, in goroutine order, with its state (`state_after` of
pipeline/goscheduler/events.py: runnable, running, blocked(REASON), syscall, other), and how many had ended.
Token counts are exact: every piece (the program's source, the table, each event line) starts at a special token,
where the tokenizer splits the text, so an example's length is the sum of its pieces'. An example whose program
source and table alone (with an empty window) do not fit is dropped and counted (`go_context_longer_than_seq_len`).

Effect on the soft targets: none on the key or the target. The row's key is still (program, the *full*
prefix's hash, k) — `doc_id` `PROGRAM:exact:k:PREFIX_HASH` — and its counts/n are the distribution
conditioned on the whole prefix; the model sees only the window and the table, so two prefixes that differ only
before the window (and leave the same goroutine table) look the same to it while their targets may differ: the
best it can do there is their mixture. The events of one run are turned into lines and counted once per run
(not per example), and the goroutine table is kept by a cursor that moves event by event as depth grows, so a
run of n events costs O(n) lines plus O(window) per example, never the O(n²) of whole prefixes.
"""

import sys
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate

from pipeline.debugger.language import escape
from pipeline.format.documents import Document, Span
from pipeline.format.go_tokens import GO_END, GO_EVENTS, GO_FILE, GO_NEXT, GO_PROGRAM, OUTCOME_TOKENS
from pipeline.format.tokenizer import PackTokenizer
from pipeline.goscheduler.events import scheduler_events, state_after
from schemas.go_next_event import OUTCOMES

GO_GROUP = "go"
FIXED_TOKENS = 4  # <|go_events|>, <|go_next|>, the outcome token, <|go_end|>
TOO_LONG = "go_context_longer_than_seq_len"


def event_line(event: dict) -> str:
    """One prefix event: its type token, then `g{goroutine}`, `(reason)`, `function file:line`, and for a
    GoBlock or GoUnblock of a rewritten run `[object state]` (go_runs `object`, `object_state`)."""
    parts = [f"g{event['goroutine']}"]
    if event["reason"]:
        parts.append(f"({event['reason']})")
    if event["function"]:
        parts.append(f"{event['function']} {event['file']}:{event['line']}")
    waits_on = " ".join(part for part in (event.get("object", ""), event.get("object_state", "")) if part)
    if waits_on:
        parts.append(f"[{waits_on}]")
    return OUTCOME_TOKENS[event["event"]] + escape(" ".join(parts)) + "\n"


def program_context(program: dict) -> str:
    files = "".join(f"{GO_FILE}{escape(file['path'])}\n{escape(file['text'])}" for file in program["files"])
    return f"{GO_PROGRAM}{escape(program['program_id'])}\n{files}"


def goroutine_table(left_out: int, states: dict[int, str]) -> str:
    """The line after `<|go_events|>` when `left_out` events are not shown: the goroutines they leave alive
    (goroutine order) with their states, and how many ended."""
    alive = [f"g{goroutine} {state}" for goroutine, state in sorted(states.items()) if state != "ended"]
    ended = len(states) - len(alive)
    text = f"[{left_out} earlier events left out; goroutines: {', '.join(alive) or 'none'}"
    return escape(text + (f"; {ended} ended]" if ended else "]")) + "\n"


class RunEvents:
    """One run's scheduler events as examples use them: each event's line, the prefix sums of their token
    counts, and a cursor over the goroutines' states (`states_at(j)`: after the first j events) that moves
    one event at a time, forwards or back."""

    def __init__(self, events: Sequence[dict], tokenizer: "PackTokenizer"):
        scheduler = scheduler_events(events)
        self.lines = [event_line(event) for event in scheduler]
        self.cumulative = [0, *accumulate(len(ids) for ids in tokenizer.encode_batch(self.lines))]
        self._goroutines = [event["goroutine"] for event in scheduler]
        self._after = [sys.intern(state_after([event])) for event in scheduler]
        self._before: list[str | None] = []  # the goroutine's state before each event (None: not created)
        last: dict[int, str] = {}
        for goroutine, state in zip(self._goroutines, self._after, strict=True):
            self._before.append(last.get(goroutine))
            last[goroutine] = state
        self._at, self._states = 0, {}

    def __len__(self) -> int:
        return len(self.lines)

    def states_at(self, j: int) -> dict[int, str]:
        while self._at < j:
            self._states[self._goroutines[self._at]] = self._after[self._at]
            self._at += 1
        while self._at > j:
            self._at -= 1
            before = self._before[self._at]
            if before is None:
                del self._states[self._goroutines[self._at]]
            else:
                self._states[self._goroutines[self._at]] = before
        return self._states


class GoExamples:
    """Examples of one unit's Go tables: `add_program`, `add_run` (only the runs the rows name first are
    needed), then `documents(rows)`; examples dropped by the window are counted in `dropped`."""

    def __init__(self, tokenizer: "PackTokenizer", seq_len: int, dropped: Counter | None = None):
        self.tokenizer, self.seq_len = tokenizer, seq_len
        self.dropped = Counter() if dropped is None else dropped
        self.contexts: dict[str, tuple[str, int]] = {}
        self.runs: dict[tuple[str, int], RunEvents] = {}

    def add_program(self, program: dict) -> None:
        context = program_context(program)
        self.contexts[program["program_id"]] = (context, len(self.tokenizer.encode(context)))

    def add_run(self, run: dict) -> None:
        self.runs[(run["program_id"], run["run_index"])] = RunEvents(run["events"], self.tokenizer)

    def load(self, programs: Iterable[dict], runs: Iterable[dict], needed: set[tuple[str, int]]) -> "GoExamples":
        """Every program's source and the events of the `needed` (program, run) pairs; `runs` is read once."""
        for program in programs:
            self.add_program(program)
        for run in runs:
            if (run["program_id"], run["run_index"]) in needed:
                self.add_run(run)
        return self

    def window(self, run: RunEvents, depth: int, budget: int) -> tuple[int, str] | None:
        """(j, the goroutine table or "") of the example at `depth`: events j..depth-1 are shown; None when
        not even the table fits in `budget` tokens."""
        cumulative, depth = run.cumulative, min(depth, len(run))
        if budget < 0:
            return None
        if cumulative[depth] <= budget:
            return 0, ""
        for j in range(bisect_left(cumulative, cumulative[depth] - budget), depth + 1):  # no earlier j fits
            table = goroutine_table(j, run.states_at(j))
            if cumulative[depth] - cumulative[j] + len(self.tokenizer.encode(table)) <= budget:
                return j, table
        return None

    def prompt(self, program_id: str, run: RunEvents, depth: int, reserved: int) -> str | None:
        """The program's source, `<|go_events|>` and the window on the run's first `depth` events that leaves
        `reserved` tokens of `seq_len` to what follows; None (counted) when not even the table fits."""
        context, context_tokens = self.contexts[program_id]
        found = self.window(run, depth, self.seq_len - context_tokens - 1 - reserved)
        if found is None:
            self.dropped[TOO_LONG] += 1
            return None
        j, table = found
        return context + GO_EVENTS + table + "".join(run.lines[j:depth])

    def first_run(self, row: dict) -> RunEvents | None:
        """The events of the row's first counted run; None when they or the program's source are missing."""
        if row["program_id"] not in self.contexts or not row["runs"]:
            return None
        return self.runs.get((row["program_id"], row["runs"][0]))

    def example(self, row: dict) -> Document | None:
        """The row's example; None for a row that is not `exact`, whose program or first run is missing, or
        that does not fit (counted)."""
        run = self.first_run(row) if row["prefix_kind"] == "exact" else None
        if run is None:
            return None
        head = self.prompt(row["program_id"], run, row["depth"], FIXED_TOKENS - 1)
        if head is None:
            return None
        counts = tuple(row["counts"][name] for name in OUTCOMES)
        best = OUTCOMES[counts.index(max(counts))]
        spans = (
            Span(head + GO_NEXT, False),
            Span(OUTCOME_TOKENS[best], True, (counts, row["n"])),
            Span(GO_END, False),
        )
        doc_id = f"{row['program_id']}:exact:{row['depth']}:{row['prefix_hash']}"
        return Document("go_next_event", doc_id, GO_GROUP, spans, splittable=False)

    def documents(self, rows: Iterable[dict]) -> Iterator[Document]:
        for row in rows:
            document = self.example(row)
            if document is not None:
                yield document


def needed_runs(next_event_rows: Iterable[dict]) -> set[tuple[str, int]]:
    """The (program, run) whose events the rows' examples show: each exact row's first counted run."""
    return {
        (row["program_id"], row["runs"][0]) for row in next_event_rows if row["prefix_kind"] == "exact" and row["runs"]
    }


def go_documents(
    next_event_rows: Sequence[dict],
    runs: Iterable[dict],
    programs: Iterable[dict],
    *,
    tokenizer: "PackTokenizer",
    seq_len: int,
    dropped: Counter | None = None,
) -> Iterator[Document]:
    """The examples of one unit's Go tables, in row order (rows of several programs are matched by
    program_id); rows whose program or counted run is missing are skipped, rows that do not fit in `seq_len`
    are counted in `dropped`. `runs` is read once, keeping only the runs the rows need."""
    examples = GoExamples(tokenizer, seq_len, dropped).load(programs, runs, needed_runs(next_event_rows))
    yield from examples.documents(next_event_rows)
