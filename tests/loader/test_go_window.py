"""Go examples from a window: the most recent events that fit in seq_len, a goroutine table for the events left
out, the key and the soft target unchanged, examples that cannot fit counted."""

from collections import Counter

import pytest

from pipeline.format.go_examples import (
    TOO_LONG,
    GoExamples,
    RunEvents,
    event_line,
    go_documents,
    goroutine_table,
    program_context,
)
from pipeline.format.go_tokens import GO_END, GO_EVENTS, GO_NEXT, OUTCOME_TOKENS
from pipeline.format.tokenizer import bytes_tokenizer, train_bpe
from pipeline.goscheduler.events import scheduler_events, state_after
from schemas.go_next_event import OUTCOMES

PROGRAM = {"program_id": "p/hand", "files": [{"path": "main.go", "text": "package main\n\nfunc main() {}\n"}]}


def _event(kind: str, goroutine: int, reason: str = "", line: int = 3) -> dict:
    return {
        "event": kind,
        "goroutine": goroutine,
        "reason": reason,
        "function": "main.main",
        "file": "main.go",
        "line": line,
    }


EVENTS = [
    _event("GoCreate", 1),
    _event("GoStart", 1),
    _event("GoCreate", 2),
    _event("UserLog", 1),  # an annotation: never an example's event
    _event("GoBlock", 1, "chan receive"),
    _event("GoStart", 2),
    _event("GoCreate", 3),
    _event("GoEnd", 2),
    _event("GoUnblock", 1),
    _event("GoStart", 3),
    _event("GoSyscall", 3, "enter"),
    _event("GoStart", 1),
]
SCHEDULER = scheduler_events(EVENTS)  # 11 events


def _row(depth: int, counts: dict[str, int] | None = None) -> dict:
    counts = counts or {"GoStart": 3, "GoEnd": 1}
    full = {name: counts.get(name, 0) for name in OUTCOMES}
    return {
        "program_id": PROGRAM["program_id"],
        "prefix_kind": "exact",
        "depth": depth,
        "prefix_hash": f"hash{depth}",
        "runs": [0, 1],
        "counts": full,
        "n": sum(full.values()),
    }


def _examples(seq_len: int, tokenizer=None) -> GoExamples:
    examples = GoExamples(tokenizer or bytes_tokenizer(), seq_len)
    examples.add_program(PROGRAM)
    examples.add_run({"program_id": PROGRAM["program_id"], "run_index": 0, "events": EVENTS})
    return examples


def _tokens(tokenizer, document) -> int:
    return sum(len(tokenizer.encode(span.text)) for span in document.spans)


def test_a_prefix_that_fits_is_shown_whole_without_a_table():
    document = _examples(4096).example(_row(11))
    assert document is not None
    head = document.spans[0].text
    assert head == program_context(PROGRAM) + GO_EVENTS + "".join(map(event_line, SCHEDULER)) + GO_NEXT
    assert "left out" not in head


def _states_after(j: int) -> dict[int, str]:
    by_goroutine: dict[int, list[dict]] = {}
    for event in SCHEDULER[:j]:
        by_goroutine.setdefault(event["goroutine"], []).append(event)
    return {g: state_after(events) for g, events in by_goroutine.items()}


@pytest.mark.parametrize("tokenizer", [bytes_tokenizer(), None], ids=["bytes", "bpe"])
def test_the_window_holds_the_most_recent_events_that_fit_and_the_table_is_the_state_they_left(tokenizer):
    if tokenizer is None:
        tokenizer = train_bpe([program_context(PROGRAM) + "".join(map(event_line, SCHEDULER)) * 20], 600)
    context = len(tokenizer.encode(program_context(PROGRAM)))
    lines = [len(tokenizer.encode(event_line(event))) for event in SCHEDULER]
    seq_len = context + 4 + sum(lines[-4:]) + 40  # room for four events and a short table, not for the prefix
    examples = _examples(seq_len, tokenizer)
    document = examples.example(_row(11))
    assert document is not None
    head = document.spans[0].text
    shown = head.split("]\n", 1)[1].removesuffix(GO_NEXT)
    j = 11 - shown.count("<|go_Go")
    assert 0 < j < 11 and shown == "".join(map(event_line, SCHEDULER[j:]))  # the most recent events, in order
    assert _tokens(tokenizer, document) <= seq_len  # exact token arithmetic: it fits ...
    states = _states_after(j)
    alive = ", ".join(f"g{g} {s}" for g, s in sorted(states.items()) if s != "ended")
    ended = sum(s == "ended" for s in states.values())
    table = f"[{j} earlier events left out; goroutines: {alive or 'none'}" + (f"; {ended} ended]" if ended else "]")
    assert head == program_context(PROGRAM) + GO_EVENTS + table + "\n" + shown + GO_NEXT
    earlier = goroutine_table(j - 1, _states_after(j - 1)) + "".join(map(event_line, SCHEDULER[j - 1 :]))
    assert (
        len(tokenizer.encode(program_context(PROGRAM) + GO_EVENTS + earlier + GO_NEXT)) + 3 > seq_len
    )  # one more: not


def test_the_goroutine_table_of_a_hand_made_run():
    assert _states_after(8) == {1: "runnable", 2: "ended", 3: "runnable"}
    run = RunEvents(EVENTS, bytes_tokenizer())
    assert run.states_at(4) == {1: "blocked(chan receive)", 2: "runnable"}
    assert run.states_at(10) == {1: "runnable", 2: "ended", 3: "syscall"}
    for j in (11, 3, 0, 7, 5, 9):  # the cursor moves both ways and always agrees with a count from the start
        assert run.states_at(j) == _states_after(j)


def test_the_key_and_the_soft_target_are_the_rows_whatever_the_window():
    row = _row(11, {"GoStart": 2, "GoEnd": 5, "End": 1})
    whole, windowed = _examples(4096).example(row), _examples(200).example(row)
    assert whole is not None and windowed is not None
    for document in (whole, windowed):
        assert document.doc_id == "p/hand:exact:11:hash11" and document.group == "go" and not document.splittable
        assert document.spans[1].text == OUTCOME_TOKENS["GoEnd"] and document.spans[2].text == GO_END
        assert document.spans[1].target == (tuple(row["counts"][name] for name in OUTCOMES), 8)
    assert len(windowed.spans[0].text) < len(whole.spans[0].text)


def test_examples_that_cannot_fit_are_dropped_and_counted():
    dropped: Counter = Counter()
    rows = [_row(depth) for depth in range(12)]
    documents = list(
        go_documents(
            rows,
            [{"program_id": PROGRAM["program_id"], "run_index": 0, "events": EVENTS}],
            [PROGRAM],
            tokenizer=bytes_tokenizer(),
            seq_len=40,  # less than the program's source
            dropped=dropped,
        )
    )
    assert documents == [] and dropped == {TOO_LONG: 12}
    kept = list(
        go_documents(
            rows,
            [{"program_id": "p/hand", "run_index": 0, "events": EVENTS}],
            [PROGRAM],
            tokenizer=bytes_tokenizer(),
            seq_len=200,
            dropped=dropped,
        )
    )
    assert [int(d.doc_id.split(":")[2]) for d in kept] == list(range(12))  # one example per row, in row order


def test_a_block_line_shows_the_object_it_waits_on():
    block = {"goroutine": 1, "event": "GoBlock", "reason": "sync", "function": "main.work", "file": "main.go"}
    block |= {"line": 9, "object": "mutex@main.go:9", "object_state": "lock, held by g0"}
    assert event_line(block).endswith("g1 (sync) main.work main.go:9 [mutex@main.go:9 lock, held by g0]\n")
    assert "[" not in event_line(block | {"object": "", "object_state": ""})
