"""The worked example of the trajectories issue, DESIGN.md §6-7, on the real trace of f(3)."""

from pipeline.debugger import Action, build_forward, build_inverse, parse, serialize
from pipeline.debugger import actions as A
from pipeline.debugger.render import forward_episode


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
    """The DESIGN §7 walk: into, over, over, breakpoint `d += i`, return, continue."""
    tree = build_forward(worked_trace)
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
    assert '<|line_sep|><|src_sep|>    d = c - a<|arg_sep|>{"..": "..", "c": "9"}' in text
    assert '{"a": "3", "b": "4", "c": "9", "d": "6", "i": "0"}' in text  # full locals at the breakpoint
    assert text.endswith('<|arg_sep|>"7"<|action_sep|><|continue|><|frame_sep|><|exit_normal|><|trace_end|>')


def test_the_grammar_doc_shows_what_the_serializer_writes(worked_trace):
    """schemas/trajectories.md's forward example is this serializer's output, byte for byte."""
    from pathlib import Path

    from pipeline.debugger import pretty

    doc = (Path(__file__).resolve().parents[2] / "schemas" / "trajectories.md").read_text(encoding="utf-8")
    tree = build_forward(worked_trace)
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
    assert pretty(serialize(forward_episode(worked_trace, tree, nodes, actions))) in doc
