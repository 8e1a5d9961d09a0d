"""Go trajectory documents: the prefix before a window, `<|go_rollout|>`, then one predicted span per step whose
type token carries the step's soft target; packed, every step is a Go position of the sample."""

from collections import Counter

from pipeline.format.go_examples import event_line, program_context
from pipeline.format.go_tokens import GO_END, GO_EVENTS, GO_ROLLOUT, OUTCOME_TOKENS
from pipeline.format.go_trajectories import GO_TRAJECTORY_GROUP, go_trajectory_documents
from pipeline.format.tokenizer import bytes_tokenizer
from pipeline.stages.go.next_event import counted_runs
from pipeline.stages.go.trajectories import trajectory_rows
from pipeline.stages.pack.packing import Packer, PackSettings
from schemas.go_next_event import OUTCOMES

PROGRAM = {"program_id": "p/roll", "files": [{"path": "main.go", "text": "package main\n\nfunc main() {}\n"}]}


def _event(kind: str, goroutine: int, reason: str = "", line: int = 3) -> dict:
    gpath = "0" if goroutine == 0 else f"0.{goroutine}"
    frame = {"function": "main.main", "file": "main.go", "line": line}
    return {"event": kind, "goroutine": goroutine, "gpath": gpath, "reason": reason, **frame}


FIRST = [
    _event("GoCreate", 1),
    _event("GoStart", 1),
    _event("UserLog", 1),  # an annotation: never a step
    _event("GoBlock", 1, "chan receive", 5),
    _event("GoUnblock", 1),
    _event("GoStart", 1),
    _event("GoEnd", 1),
]
SECOND = FIRST[:4] + [_event("GoEnd", 1)]


def _runs() -> list[dict]:
    return [
        {"program_id": PROGRAM["program_id"], "run_index": i, "complete": True, "status": "ok", "events": events}
        for i, events in enumerate((FIRST, FIRST, SECOND))
    ]


def _documents(seq_len: int, window: int = 3, dropped: Counter | None = None):
    runs = _runs()
    rows = trajectory_rows(PROGRAM["program_id"], counted_runs(runs), window=window, stride=window)
    documents = go_trajectory_documents(
        rows, runs, [PROGRAM], tokenizer=bytes_tokenizer(), seq_len=seq_len, dropped=dropped
    )
    return rows, list(documents)


def test_each_step_is_a_predicted_span_with_its_soft_target_on_the_type_token():
    rows, documents = _documents(4096)
    assert len(documents) == len(rows) == 4  # depths 0 (every run), 3 (FIRST), 3 (SECOND: GoEnd, End), 6 (End)
    assert [row["runs"] for row in rows] == [[0, 1, 2], [0, 1], [2], [0, 1]]
    scheduler = [event for event in FIRST if event["event"] != "UserLog"]
    for row, document in zip(rows, documents, strict=True):
        assert document.group == GO_TRAJECTORY_GROUP == "go_trajectory" and not document.splittable
        assert document.table == "go_trajectories"
        assert document.doc_id == f"p/roll:trajectory:{row['depth']}:{row['n_steps']}:{row['window_hash']}"
        head, *steps, end = document.spans
        assert head.text.endswith(GO_ROLLOUT) and not head.predicted and end.text == GO_END
        assert len(steps) == row["n_steps"]
        for span, step in zip(steps, row["steps"], strict=True):
            assert span.predicted and span.text.startswith(OUTCOME_TOKENS[step["event"]])
            assert span.target == (tuple(step["counts"][name] for name in OUTCOMES), step["n"])
    deep = documents[1]  # FIRST from depth 3: its prefix is the first three scheduler events
    assert deep.spans[0].text == program_context(PROGRAM) + GO_EVENTS + "".join(map(event_line, scheduler[:3])) + (
        GO_ROLLOUT
    )
    assert [span.text for span in deep.spans[1:-1]] == [event_line(event) for event in scheduler[3:6]]
    ended = documents[2]
    assert [span.text for span in ended.spans[1:-1]] == [event_line(_event("GoEnd", 1)), OUTCOME_TOKENS["End"] + "\n"]
    assert ended.spans[1].target == ((0, 0, 0, 2, 0, 1, 0, 0, 0), 3)  # FIRST twice unblocks, SECOND ends ...
    assert ended.spans[2].target == ((0,) * 8 + (1,), 1)  # ... then SECOND alone: n = 1


def test_packed_every_step_is_a_go_position_at_its_type_token():
    tokenizer = bytes_tokenizer()
    rows, documents = _documents(4096)
    samples: list[dict] = []
    packer = Packer(tokenizer, PackSettings(seq_len=1024), "u", samples.extend)
    packer.add_all(documents).finish()
    assert {sample["group"] for sample in samples} == {"go_trajectory"}
    positions = [p for sample in samples for p in sample["go_positions"]]
    assert len(positions) == sum(row["n_steps"] for row in rows)
    outcome_ids = {tokenizer.special_ids[token] for token in OUTCOME_TOKENS.values()}
    rollout = tokenizer.special_ids[GO_ROLLOUT]
    for sample in samples:
        for position, counts, n in zip(sample["go_positions"], sample["go_counts"], sample["go_n"], strict=True):
            assert sample["input_ids"][position] in outcome_ids and sum(counts) == n >= 1
            assert sample["loss_mask"][position] == 1
        after_rollout = [i + 1 for i, token in enumerate(sample["input_ids"]) if token == rollout]
        assert after_rollout and set(after_rollout) <= set(sample["go_positions"])  # step 0 right after it


def test_a_long_prefix_is_windowed_to_leave_room_for_every_step_and_what_cannot_fit_is_counted():
    _, whole = _documents(4096, window=2)
    tokenizer = bytes_tokenizer()
    deepest = whole[-1]
    size = sum(len(tokenizer.encode(span.text)) for span in deepest.spans)
    _, windowed = _documents(size - 20, window=2)
    shrunk = next(d for d in windowed if d.doc_id == deepest.doc_id)
    assert "earlier events left out" in shrunk.spans[0].text and shrunk.spans[1:] == deepest.spans[1:]
    assert sum(len(tokenizer.encode(span.text)) for span in shrunk.spans) <= size - 20
    dropped: Counter = Counter()
    _, none = _documents(40, dropped=dropped)
    assert none == [] and dropped == {"go_context_longer_than_seq_len": 4}
