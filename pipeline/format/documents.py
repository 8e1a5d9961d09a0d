"""Training documents as spans: a span is text the packer never splits, with its loss flag.

A trajectory (schemas/trajectories.md) becomes its prompt (the context and the start frame), then for every
action an *action span* (the action token, with a breakpoint's target) and a *state span* (the state the
action leads to: its frame through `<|frame_sep|>`, or an end token through `<|trace_end|>`). A cut
trajectory's lone closing `<|trace_end|>` is a span of its own. State spans are what the model predicts:
they are the loss-masked spans in the default mode. Packing splits documents only between spans, so never
inside a state.
"""

import re
from dataclasses import dataclass

from pipeline.debugger.language import ACTIONS, ENDS, EVENT_TOKENS, FRAME_SEP, TRACE_END, LanguageError, split_prompt

_SPECIAL = re.compile(
    "|".join(
        re.escape(token) for token in (*EVENT_TOKENS.values(), *ENDS.values(), *ACTIONS.values(), FRAME_SEP, TRACE_END)
    )
)
_ACTION_TOKENS = frozenset(ACTIONS.values())
_STATE_STARTS = frozenset((*EVENT_TOKENS.values(), *ENDS.values()))


@dataclass(frozen=True)
class Span:
    """Text kept whole; `predicted`: a state (or a Go next event) the model is trained to produce. `target`:
    a soft target (counts per outcome, n) for the span's first token, or None."""

    text: str
    predicted: bool
    target: tuple[tuple[int, ...], int] | None = None


@dataclass(frozen=True)
class Document:
    """One training document: its source row (`table`, `doc_id`), its mix group, its spans in order, and
    whether packing may cut it between spans (a Go example is useless without its context)."""

    table: str
    doc_id: str
    group: str
    spans: tuple[Span, ...]
    splittable: bool = True


def trajectory_spans(text: str) -> tuple[Span, ...]:
    """The spans of a `trajectories.text`; they concatenate to `text`. LanguageError on a text that does not
    follow the grammar's frame/action alternation."""
    context, frames = split_prompt(text)
    first_end = frames.find(FRAME_SEP)
    if first_end < 0:
        raise LanguageError("a trajectory has a start frame ending in <|frame_sep|>")
    at = len(context) + first_end + len(FRAME_SEP)
    spans = [Span(text[:at], False)]
    start, in_state = at, False
    for match in _SPECIAL.finditer(text, at):
        token = match.group()
        if not in_state and token in _ACTION_TOKENS:
            if match.start() != start:
                raise LanguageError(f"character {start}: text between a state and the next action")
            in_state = None  # in an action span, waiting for the state it leads to
        elif in_state is None and token in _STATE_STARTS:
            spans.append(Span(text[start : match.start()], False))
            start, in_state = match.start(), True
        elif in_state and token in (FRAME_SEP, TRACE_END):
            spans.append(Span(text[start : match.end()], True))
            start, in_state = match.end(), False
        elif in_state is False and token == TRACE_END:
            spans.append(Span(text[start : match.end()], False))
            start = match.end()
    if start != len(text) or in_state is not False:
        raise LanguageError(f"character {start}: the trajectory does not end with a whole state or <|trace_end|>")
    return tuple(spans)


def trajectory_group(source_kind: str, direction: str) -> str:
    """The mix group of a trajectory: `{function|repo|unknown}/{forward|inverse}`."""
    return f"{source_kind}/{direction}"
