"""The worked example of the trajectories issue, docs/architecture.md §7–8, on the real trace of f(3)."""

from debugger_helpers import WORKED_EXAMPLE

from pipeline.debugger import Action, build_forward, build_inverse, parse, serialize
from pipeline.debugger import actions as A
from pipeline.debugger.language import FRAME_SEP, split_prompt
from pipeline.debugger.render import forward_episode, plain_episode

_CONTEXT = "<|trace_context_start|>" + WORKED_EXAMPLE.replace("def f(a):", "def f(a):  # << START_OF_TRACE") + FRAME_SEP
WORKED_FORWARD_TEXT = _CONTEXT + (
    '<|call_sep|>{"a": "3"}<|action_sep|>def f(a):<|frame_sep|>'
    '<|step_into|><|line_sep|>{"..": ".."}<|action_sep|>    b = a + 1<|frame_sep|>'
    '<|step_over|><|line_sep|>{"..": "..", "b": "4"}<|action_sep|>    c = g(b)<|frame_sep|>'
    '<|step_over|><|line_sep|>{"..": "..", "c": "9"}<|action_sep|>    d = c - a<|frame_sep|>'
    '<|breakpoint|>        d += i<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "6", "i": "0"}'
    "<|action_sep|>        d += i<|frame_sep|>"
    '<|step_return|><|return_sep|><|action_sep|>    return d<|arg_sep|>"7"<|frame_sep|>'
    "<|continue|><|exit_normal|><|trace_end|>"
)
WORKED_CWM_TEXT = _CONTEXT + (
    '<|call_sep|>{"a": "3"}<|action_sep|>def f(a):<|frame_sep|>'
    '<|line_sep|>{"a": "3"}<|action_sep|>    b = a + 1<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4"}<|action_sep|>    c = g(b)<|frame_sep|>'
    '<|call_sep|>{"x": "4"}<|action_sep|>def g(x):<|frame_sep|>'
    '<|line_sep|>{"x": "4"}<|action_sep|>    y = x * 2<|frame_sep|>'
    '<|line_sep|>{"x": "4", "y": "8"}<|action_sep|>    return y + 1<|frame_sep|>'
    '<|return_sep|><|action_sep|>    return y + 1<|arg_sep|>"9"<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9"}<|action_sep|>    d = c - a<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "6"}<|action_sep|>    for i in range(2):<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "6", "i": "0"}<|action_sep|>        d += i<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "6", "i": "0"}<|action_sep|>    for i in range(2):<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "6", "i": "1"}<|action_sep|>        d += i<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "7", "i": "1"}<|action_sep|>    for i in range(2):<|frame_sep|>'
    '<|line_sep|>{"a": "3", "b": "4", "c": "9", "d": "7", "i": "1"}<|action_sep|>    return d<|frame_sep|>'
    '<|return_sep|><|action_sep|>    return d<|arg_sep|>"7"<|frame_sep|>'
    "<|end_of_text|>"
)


def _line(trace, source):
    return next(
        i for i, (k, s) in enumerate(zip(trace.kinds, trace.sources, strict=True)) if k == "line" and s == source
    )


def test_step_over_the_calling_line_lands_on_the_next_line_with_c_9(worked_trace):
    tree = build_forward(worked_trace)
    landing = A.step_over(tree, _line(worked_trace, "    c = g(b)"))
    assert worked_trace.kinds[landing] == "line"
    assert worked_trace.sources[landing] == "    d = c - a"
    assert worked_trace.locals[landing]["c"] == "9"


def test_step_into_the_calling_line_lands_on_gs_call_with_x_4(worked_trace):
    tree = build_forward(worked_trace)
    landing = A.step_into(tree, _line(worked_trace, "    c = g(b)"))
    assert (worked_trace.kinds[landing], worked_trace.functions[landing]) == ("call", "g")
    assert worked_trace.locals[landing] == {"x": "4"}


def test_inverse_over_and_into_from_the_inv_line_call_of_the_calling_line(worked_trace):
    tree = build_inverse(worked_trace, build_forward(worked_trace))
    calling = _line(worked_trace, "    c = g(b)")
    line_call = next(k for k, kind in enumerate(tree.kind) if kind == "inv_line_call")
    assert tree.event[line_call] == calling
    over = A.inv_step_over(tree, line_call)
    assert (tree.kind[over], tree.event[over]) == ("inv_line", calling)
    into = A.inv_step_into(tree, line_call)
    assert tree.kind[into] == "inv_return"
    assert worked_trace.functions[tree.event[into]] == "g" and worked_trace.args[tree.event[into]] == "9"


def test_the_design_illustration_round_trips(worked_trace):
    """The worked walk of docs/architecture.md §7: into, over, over, breakpoint `d += i`, return, continue."""
    tree, nodes, actions = _design_walk(worked_trace)
    assert [worked_trace.sources[n] for n in nodes[:-1]] == [
        "def f(a):",
        "    b = a + 1",
        "    c = g(b)",
        "    d = c - a",
        "        d += i",
        "    return d",
    ]
    assert nodes[-1] == tree.exit
    episode = forward_episode(worked_trace, tree, nodes, actions)
    text = serialize(episode)
    assert parse(text) == episode
    assert text == WORKED_FORWARD_TEXT


def _design_walk(trace):
    tree = build_forward(trace)
    actions = [
        Action("step_into"),
        Action("step_over"),
        Action("step_over"),
        Action("breakpoint", "        d += i"),
        Action("step_return"),
        Action("continue"),
    ]
    nodes = [0]
    for action in actions:
        nodes.append(A.apply_forward(tree, nodes[-1], action.name, action.target))
    return tree, nodes, actions


def test_the_worked_example_in_full_locals_writes_every_observed_frame_in_full(worked_trace):
    tree, nodes, actions = _design_walk(worked_trace)
    episode = forward_episode(worked_trace, tree, nodes, actions, delta=False)
    text = serialize(episode)
    assert parse(text) == episode
    assert '".."' not in text
    assert '<|step_over|><|line_sep|>{"a": "3", "b": "4"}<|action_sep|>    c = g(b)<|frame_sep|>' in text


def test_the_worked_example_as_a_plain_cwm_trace(worked_trace):
    """The cwm dialect: CWM's trace-prediction prompt, then every event as a CWM frame, then end of text."""
    episode = plain_episode(worked_trace)
    text = serialize(episode, "cwm")
    assert text == WORKED_CWM_TEXT
    assert parse(text, "cwm") == episode
    assert split_prompt(text) == (_CONTEXT, WORKED_CWM_TEXT[len(_CONTEXT) :])


def test_the_grammar_doc_shows_what_the_serializer_writes(worked_trace):
    """schemas/trajectories.md's examples are this serializer's output, byte for byte, in both dialects."""
    from pathlib import Path

    from pipeline.debugger import pretty

    doc = (Path(__file__).resolve().parents[2] / "schemas" / "trajectories.md").read_text(encoding="utf-8")
    tree, nodes, actions = _design_walk(worked_trace)
    assert pretty(serialize(forward_episode(worked_trace, tree, nodes, actions))) in doc
    assert pretty(serialize(plain_episode(worked_trace), "cwm"), show_code=False) in doc
