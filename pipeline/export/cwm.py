"""The cwm dialect: each trace as the Code World Model's trace-prediction prompt and its expected completion.

One record per walkable `traces` row: `prompt` (`<|trace_context_start|>` + the code with the entry line
marked `  # << START_OF_TRACE` + `<|frame_sep|>`) and `completion` (every event as a CWM frame with full
locals, then `<|end_of_text|>` unless the trace was truncated), exactly the layout of schemas/trajectories.md;
`pipeline.debugger.language.parse(prompt + completion, "cwm")` reads a record back. A trace the debugger
cannot walk (empty, malformed) has no record: the trajectories stage's failures table names it.
"""

from collections.abc import Iterator

from pipeline.debugger.events import Trace, TraceShapeError
from pipeline.debugger.language import serialize, split_prompt
from pipeline.debugger.render import plain_episode
from pipeline.engine.reader import table_rows

OPTIONS: frozenset[str] = frozenset()


def records(data: str) -> Iterator[dict]:
    for row in table_rows(data, "traces"):
        try:
            trace = Trace.from_row(row)
        except TraceShapeError:
            continue
        prompt, completion = split_prompt(serialize(plain_episode(trace), "cwm"))
        yield {
            "trace_id": row["trace_id"],
            "source_id": row["source_id"],
            "source_kind": row["source_kind"],
            "exit": row["exit"],
            "truncated": row["truncated"],
            "prompt": prompt,
            "completion": completion,
        }
