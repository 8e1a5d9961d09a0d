"""Go trajectory documents: a program's source, a window on the prefix before a `go_trajectories` window, then
the window's steps, each with its soft target.

One document per `go_trajectories` row (schemas/go_trajectories.py). Its text:

    <|go_program|>PROGRAM_ID
    <|go_file|>PATH
    FILE TEXT ...                                        (the program's files, as in go_examples.py)
    <|go_events|>[j earlier events left out; ...]        (the prefix's events j..d-1, windowed as go_examples.py
    <|go_GoCreate|>g1 main.main main.go:9                 does: the table only when j > 0)
    <|go_rollout|>
    <|go_GoStart|>g1 main.worker main.go:14              (step 0: event d, one span)
    <|go_GoBlock|>g1 (chan receive) main.worker main.go:15
    ...
    <|go_End|>                                           (a last End step when the runs ended in the window)
    <|go_end|>

Each step is one span, predicted (loss-masked in the default mode), written as `event_line` writes a prefix
event (End: its outcome token alone); its first token — the type token — carries the step's soft target (its
`counts` in OUTCOMES order and `n`), so a document holds up to k soft targets and the objective's KL term applies
at each. The window on the prefix leaves room for every step: an example whose source, table and steps do not
fit in `seq_len` is dropped and counted (`go_context_longer_than_seq_len`). Mix group `go_trajectory`; doc_id
`PROGRAM:trajectory:DEPTH:N_STEPS:WINDOW_HASH` (the row's key). The prefix and the steps' token counts come from
the row's first run (`RunEvents`, built once per run).
"""

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from pipeline.format.documents import Document, Span
from pipeline.format.go_examples import GoExamples, event_line
from pipeline.format.go_tokens import GO_END, GO_ROLLOUT, OUTCOME_TOKENS
from pipeline.format.tokenizer import PackTokenizer
from schemas.go_next_event import END, OUTCOMES

GO_TRAJECTORY_GROUP = "go_trajectory"


def step_line(step: dict) -> str:
    """A step's text: the event's line as the prefix writes it, or the End token alone."""
    return OUTCOME_TOKENS[END] + "\n" if step["event"] == END else event_line(step)


def trajectory_document(examples: GoExamples, row: dict) -> Document | None:
    """The row's document; None when its program or first run is missing, or when it does not fit (counted)."""
    run = examples.first_run(row)
    if run is None:
        return None
    depth, steps = row["depth"], row["steps"]
    events = len(steps) - int(row["ends"])
    lines = run.lines[depth : depth + events] + ([step_line(steps[-1])] if row["ends"] else [])
    tokens = run.cumulative[depth + events] - run.cumulative[depth]
    if row["ends"]:
        tokens += len(examples.tokenizer.encode(lines[-1]))
    head = examples.prompt(row["program_id"], run, depth, tokens + 2)  # + <|go_rollout|> and <|go_end|>
    if head is None:
        return None
    spans = [Span(head + GO_ROLLOUT, False)]
    for line, step in zip(lines, steps, strict=True):
        spans.append(Span(line, True, (tuple(step["counts"][name] for name in OUTCOMES), step["n"])))
    spans.append(Span(GO_END, False))
    doc_id = f"{row['program_id']}:trajectory:{depth}:{row['n_steps']}:{row['window_hash']}"
    return Document("go_trajectories", doc_id, GO_TRAJECTORY_GROUP, tuple(spans), splittable=False)


def trajectory_documents(examples: GoExamples, rows: Iterable[dict]) -> Iterator[Document]:
    for row in rows:
        document = trajectory_document(examples, row)
        if document is not None:
            yield document


def needed_trajectory_runs(rows: Iterable[dict]) -> set[tuple[str, int]]:
    """The (program, run) whose events the rows' documents show: each row's first run."""
    return {(row["program_id"], row["runs"][0]) for row in rows if row["runs"]}


def go_trajectory_documents(
    rows: Sequence[dict],
    runs: Iterable[dict],
    programs: Iterable[dict],
    *,
    tokenizer: "PackTokenizer",
    seq_len: int,
    dropped: Counter | None = None,
) -> Iterator[Document]:
    """The documents of `go_trajectories` rows, in row order (rows of several programs matched by program_id);
    `runs` is read once, keeping only the runs the rows show."""
    examples = GoExamples(tokenizer, seq_len, dropped).load(programs, runs, needed_trajectory_runs(rows))
    yield from trajectory_documents(examples, rows)
