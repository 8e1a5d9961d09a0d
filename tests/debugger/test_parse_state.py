"""`parse_state` reads one state as a trajectory writes it (how the evaluation reads a predicted state)."""

import pytest

from pipeline.debugger.language import LanguageError, State, parse, parse_state
from pipeline.format.documents import trajectory_spans

TEXT = (
    "<|trace_context_start|>def f(x):  # << START_OF_TRACE\n    y = x + 1\n    return y\n<|frame_sep|>"
    '<|call_sep|>{"x": "1"}<|action_sep|>def f(x):<|frame_sep|>'
    '<|step_into|><|line_sep|>{"..": ".."}<|action_sep|>    y = x + 1<|frame_sep|>'
    '<|step_into|><|line_sep|>{"..": "..", "y": "2"}<|action_sep|>    return y<|frame_sep|>'
    '<|step_into|><|return_sep|><|action_sep|>    return y<|arg_sep|>"2"<|frame_sep|>'
    "<|continue|><|exit_normal|><|trace_end|>"
)


def test_every_state_span_of_a_trajectory_parses_to_the_episode_s_state():
    episode, spans = parse(TEXT), trajectory_spans(TEXT)
    written = episode.states[0].locals
    for k in range(len(episode.actions)):
        state = parse_state(spans[2 + 2 * k].text, written)
        truth = episode.states[k + 1]
        assert (state.event, state.source, state.locals, state.arg) == (
            truth.event,
            truth.source,
            truth.locals,
            truth.arg,
        )
        if truth.event in ("call", "line"):
            written = truth.locals
    assert parse_state("<|exit_normal|>", None) == State("exit_normal")


@pytest.mark.parametrize(
    "text",
    [
        "",
        '<|line_sep|>{"x": "1"}<|action_sep|>    y = 1',  # no closing <|frame_sep|>
        '<|line_sep|>{"x": "1"}<|action_sep|>    y = 1<|frame_sep|><|step_into|>',  # text after the state
        '<|line_sep|>{"..": ".."}<|action_sep|>    y = 1<|frame_sep|>',  # a delta with nothing written before
        "junk<|exit_normal|>",
    ],
)
def test_anything_but_exactly_one_state_is_a_language_error(text):
    with pytest.raises(LanguageError):
        parse_state(text, None)
