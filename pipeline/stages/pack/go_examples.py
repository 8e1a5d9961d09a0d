"""Go training examples: a program's source, an execution prefix, and the empirical next-event distribution.

One example per `go_next_event` row of prefix kind `exact` (runs that agree on their first k scheduler
events, so the prefix is one sequence and the distribution is conditional on it). Its text:

    <|go_program|>PROGRAM_ID
    <|go_file|>PATH
    FILE TEXT ...                                         (every file of the program, in go_programs order)
    <|go_events|><|go_GoCreate|>g1 main.main main.go:9
    <|go_GoBlock|>g1 (chan receive) main.main main.go:12   (the k prefix events: type token, goroutine,
    ...                                                     reason in parentheses when there is one, the
                                                            frame `function file:line` when there is one)
    <|go_next|><|go_GoUnblock|><|go_end|>

Every payload is escaped as the formal language's (`<|` → `<||`). The token after `<|go_next|>` names the
most frequent next outcome (ties: schema order of `go_next_event.OUTCOMES`) and carries the soft target:
the row's `counts` in `OUTCOMES` order and `n`. It is the example's only loss-masked token in the default mode.
"""

from collections.abc import Sequence

from pipeline.debugger.language import escape
from pipeline.stages.go.next_event import scheduler_events
from pipeline.stages.pack.documents import Document, Span
from schemas.go_next_event import OUTCOMES

OUTCOME_TOKENS = {name: f"<|go_{name}|>" for name in OUTCOMES}
GO_PROGRAM, GO_FILE, GO_EVENTS, GO_NEXT, GO_END = (
    "<|go_program|>",
    "<|go_file|>",
    "<|go_events|>",
    "<|go_next|>",
    "<|go_end|>",
)
GO_TOKENS: tuple[str, ...] = (GO_PROGRAM, GO_FILE, GO_EVENTS, GO_NEXT, GO_END, *OUTCOME_TOKENS.values())
GO_GROUP = "go"


def event_line(event: dict) -> str:
    """One prefix event: its type token, then `g{goroutine}`, `(reason)`, `function file:line`."""
    parts = [f"g{event['goroutine']}"]
    if event["reason"]:
        parts.append(f"({event['reason']})")
    if event["function"]:
        parts.append(f"{event['function']} {event['file']}:{event['line']}")
    return OUTCOME_TOKENS[event["event"]] + escape(" ".join(parts)) + "\n"


def program_context(program: dict) -> str:
    files = "".join(f"{GO_FILE}{escape(file['path'])}\n{escape(file['text'])}" for file in program["files"])
    return f"{GO_PROGRAM}{escape(program['program_id'])}\n{files}"


def go_documents(next_event_rows: Sequence[dict], runs: Sequence[dict], programs: Sequence[dict]) -> list[Document]:
    """The examples of one program's tables (rows of another program in the same shards are matched by
    program_id); rows whose program or counted run is missing are skipped."""
    contexts = {program["program_id"]: program_context(program) for program in programs}
    events = {(run["program_id"], run["run_index"]): run["events"] for run in runs}
    documents = []
    for row in next_event_rows:
        if row["prefix_kind"] != "exact" or row["program_id"] not in contexts or not row["runs"]:
            continue
        run_events = events.get((row["program_id"], row["runs"][0]))
        if run_events is None:
            continue
        prefix = scheduler_events(run_events)[: row["depth"]]
        counts = tuple(row["counts"][name] for name in OUTCOMES)
        best = OUTCOMES[counts.index(max(counts))]
        head = contexts[row["program_id"]] + GO_EVENTS + "".join(map(event_line, prefix)) + GO_NEXT
        spans = (Span(head, False), Span(OUTCOME_TOKENS[best], True, (counts, row["n"])), Span(GO_END, False))
        doc_id = f"{row['program_id']}:exact:{row['depth']}:{row['prefix_hash']}"
        documents.append(Document("go_next_event", doc_id, GO_GROUP, spans, splittable=False))
    return documents
