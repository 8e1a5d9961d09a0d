"""Properties of the trees, actions, policy and language over generated and real example traces."""

import json
import re
import tempfile
from pathlib import Path

import pytest
from debugger_helpers import synthetic_row, trace_row
from debugger_programs import PROGRAMS
from entry_helpers import generator_entry_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.debugger import (
    Action,
    Episode,
    PolicyConfig,
    State,
    Trace,
    build_forward,
    build_inverse,
    parse,
    sample_trajectories,
    serialize,
)
from pipeline.debugger import actions as A
from pipeline.debugger.language import (
    ACTION_SEP,
    ARG_SEP,
    DIALECTS,
    EVENT_TOKENS,
    FRAME_SEP,
    SPECIAL_TOKENS,
    START_MARKER,
    TRACE_CONTEXT_START,
    VALUED,
    unescape,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "functions.jsonl"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _example_traces() -> list[Trace]:
    traces = [Trace.from_row(trace_row(code, entry, input, trace_id=name)) for name, code, entry, input in PROGRAMS]
    with open(EXAMPLES, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    for record in records:
        if record["id"].startswith("bad_"):
            continue
        row = trace_row(
            record["code"], record.get("entry", "f"), record["input"], trace_id=record["id"], max_events=3000
        )
        if row["events"]:
            traces.append(Trace.from_row(row))
    return traces


def _generator_entry_traces() -> list[Trace]:
    """The repository traces of the programs' generator functions, as the entry tracer cuts them: each holds
    several root-level activations of the generator's frame."""
    with tempfile.TemporaryDirectory() as scratch:
        return [
            Trace.from_row(row)
            for _, code, entry, input in PROGRAMS
            for row in generator_entry_rows(Path(scratch), code, entry, input)
        ]


EXAMPLE_TRACES = _example_traces()
GENERATOR_ENTRY_TRACES = _generator_entry_traces()
traces = st.one_of(
    st.builds(
        lambda seed, cut, repo: Trace.from_row(synthetic_row(seed, truncate=cut, repo=repo)),
        st.integers(0, 10**9),
        st.booleans(),
        st.booleans(),
    ),
    st.sampled_from(EXAMPLE_TRACES),
    st.sampled_from(GENERATOR_ENTRY_TRACES),
)


def test_the_generator_entries_are_several_root_level_activations():
    assert {trace.source_id for trace in GENERATOR_ENTRY_TRACES} == {"count", "gen", "inner", "outer", "naturals"}
    for trace in GENERATOR_ENTRY_TRACES:
        tree = build_forward(trace)
        assert sum(tree.parent[i] == -1 and kind == "call" for i, kind in enumerate(trace.kinds)) > 1


def _depth(tree, node: int) -> int:
    depth = 0
    while node != tree.n and tree.parent[node] != -1:
        node = tree.parent[node]
        depth += 1
    return depth


def _reference_over(tree, node: int) -> int:
    """step_over of docs/architecture.md §7, straight from the words: next node at the level, else one level up."""
    while node != -1:
        if tree.next_sib[node] != -1:
            return tree.next_sib[node]
        node = tree.parent[node]
    return tree.n


def _reference_inverse(trace: Trace, fwd) -> list[tuple[str, int]]:
    """The inverse pre-order, recursively, for small trees: [(kind, event)]."""
    children: dict[int, list[int]] = {}
    for node in range(fwd.n):
        children.setdefault(fwd.parent[node], []).append(node)
    out = []

    def level(nodes):
        for node in reversed(nodes):
            if node in children:
                out.append(("inv_line_call", node))
                level(children[node])
            out.append(("inv_" + trace.kinds[node], node))

    level(children[-1])
    return out + [("inv_entry", -1)]


@SETTINGS
@given(traces)
def test_only_step_into_replays_the_trace(trace):
    tree = build_forward(trace)
    walk = [0]
    while walk[-1] != tree.n:
        walk.append(A.step_into(tree, walk[-1]))
    assert walk == list(range(tree.n + 1))
    for node in range(tree.n):  # every other action skips ahead, never back
        assert A.step_over(tree, node) > node and A.step_return(tree, node) > node
        assert A.continue_(tree, node) == tree.n


@SETTINGS
@given(traces)
def test_step_over_is_the_next_node_at_the_level_and_never_goes_deeper(trace):
    tree = build_forward(trace)
    for node in range(tree.n):
        landing = A.step_over(tree, node)
        assert landing == _reference_over(tree, node)
        assert landing == tree.n or _depth(tree, landing) <= _depth(tree, node)


@SETTINGS
@given(traces)
def test_step_return_lands_on_the_end_of_the_activation_or_moves_like_step_over(trace):
    tree = build_forward(trace)
    for node in range(tree.n):
        landing = A.step_return(tree, node)
        if tree.is_end[node]:
            assert landing == A.step_over(tree, node)
        elif landing != tree.n:
            assert trace.kinds[landing] in ("return", "exception") and tree.is_end[landing]
            assert trace.frames[landing] == trace.frames[node]
            assert tree.act_call[landing] == tree.act_call[node]
            assert tree.parent[landing] == tree.parent[node]
        else:  # only an activation cut by truncation has no end
            assert tree.act_end[node] == -1 and trace.exit == "never"


@SETTINGS
@given(traces, st.data())
def test_a_breakpoint_lands_on_the_first_future_line_with_that_text_or_on_the_exit(trace, data):
    tree = build_forward(trace)
    node = data.draw(st.integers(0, tree.n - 1))
    texts = sorted(set(trace.sources)) + ["no such line", trace.code.splitlines()[0] if trace.code else ""]
    source = data.draw(st.sampled_from(texts))
    landing = A.breakpoint_(tree, node, source)
    later = [i for i in range(node + 1, tree.n) if trace.kinds[i] == "line" and trace.sources[i] == source]
    assert landing == (later[0] if later else tree.n)


@SETTINGS
@given(traces)
def test_inv_step_into_visits_every_state_in_reverse_calling_lines_twice(trace):
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    walk = [0]
    while walk[-1] != inv.entry:
        walk.append(A.inv_step_into(inv, walk[-1]))
    assert walk == list(range(len(inv.kind)))
    plain = [inv.event[k] for k in walk if inv.kind[k] not in ("inv_line_call", "inv_entry")]
    assert plain == list(range(fwd.n - 1, -1, -1))
    duplicated = [inv.event[k] for k in walk if inv.kind[k] == "inv_line_call"]
    assert sorted(duplicated) == [node for node in range(fwd.n) if fwd.has_children[node]]
    if fwd.n <= 200:
        assert list(zip(inv.kind, inv.event, strict=True)) == _reference_inverse(trace, fwd)


@SETTINGS
@given(traces)
def test_inv_step_over_skips_to_the_plain_copy_and_the_level_ends_at_the_entry(trace):
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    small = len(inv.kind) <= 300
    for k in range(len(inv.kind) - 1):
        landing = A.inv_step_over(inv, k)
        if inv.kind[k] == "inv_line_call":
            assert (inv.kind[landing], inv.event[landing]) == ("inv_" + trace.kinds[inv.event[k]], inv.event[k])
        assert landing > k
        if small:
            assert landing == _reference_inv_over(inv, k)
    walk = [0]
    while walk[-1] != inv.entry:
        walk.append(A.inv_step_over(inv, walk[-1]))
    assert all(inv.parent[k] == -1 for k in walk)


def _reference_inv_over(inv, k: int) -> int:
    """inv_step_over of docs/architecture.md §7, from the words: the next node at the level, else one level up."""
    while True:
        later = [j for j in range(k + 1, len(inv.kind)) if inv.parent[j] == inv.parent[k]]
        if later:
            return later[0]
        if inv.parent[k] == -1:
            return inv.entry
        k = inv.parent[k]


@SETTINGS
@given(traces)
def test_inv_step_call_lands_on_the_activations_call_with_the_frames_arguments(trace):
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    first_call = {}
    for i, kind in enumerate(trace.kinds):
        if kind == "call":
            first_call.setdefault(trace.frames[i], i)
    for k in range(len(inv.kind) - 1):
        landing = A.inv_step_call(inv, k)
        if inv.kind[k] == "inv_call":
            assert landing == A.inv_step_over(inv, k)
            continue
        event, target = inv.event[k], inv.event[landing]
        assert inv.kind[landing] == "inv_call" and trace.frames[target] == trace.frames[event]
        assert target == fwd.act_call[event] and landing > k
        if target == first_call[trace.frames[event]]:  # not a generator resume: the arguments
            assert trace.locals[target] == trace.locals[first_call[trace.frames[event]]]


@SETTINGS
@given(traces, st.integers(0, 2**31), st.integers(1, 3))
def test_sampled_trajectories_round_trip_and_are_deterministic(trace, seed, k):
    config = PolicyConfig(max_actions=40)
    first = sample_trajectories(trace, config, seed, k)
    again = sample_trajectories(trace, config, seed, k)
    assert [t.text for t in first] == [t.text for t in again]
    assert [t.nodes for t in first] == [t.nodes for t in again]
    assert len(first) == 2 * k
    for trajectory in first:
        assert parse(trajectory.text) == trajectory.episode
        assert len(trajectory.nodes) == len(trajectory.actions) + 1 <= config.max_actions + 1
    # more trajectories keep the first ones
    more = sample_trajectories(trace, config, seed, k + 1)
    assert [t.text for t in more if t.sample_index < k] == [t.text for t in first]


def _texts():
    pieces = st.sampled_from(
        [
            "<|",
            "<||",
            "|>",
            "<",
            "|",
            "a",
            " ",
            "\n",
            '"',
            "\\",
            "é",
            "..",
            "{",
            "<|frame_sep|>",
            "<|trace_end|>",
            "<|action_sep|>",
            "<|end_of_text|>",
            START_MARKER,
            "<< START_OF_TRACE",
            "<",
            "\u2028",
            "\x00",
        ]
    )
    return st.lists(pieces, max_size=8).map("".join)


@st.composite
def episodes(draw, dialect="debugger"):
    forward = dialect == "cwm" or draw(st.booleans())
    events = (
        ["call", "line", "return", "exception"]
        if forward
        else ["inv_call", "inv_line", "inv_line_call", "inv_return", "inv_exception"]
    )
    names = (
        ["step_into", "step_over", "step_return", "breakpoint", "continue"]
        if forward
        else ["inv_step_into", "inv_step_over", "inv_step_call"]
    )
    n = draw(st.integers(0 if dialect == "cwm" else 1, 6))
    states, actions = [], []
    written = False
    for _ in range(n):
        event = draw(st.sampled_from(events))
        if event in VALUED:
            states.append(State(event, draw(_texts()), {}, draw(st.one_of(st.none(), _texts())), True))
            continue
        local_map = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "é"]), _texts(), max_size=3))
        states.append(State(event, draw(_texts()), local_map, None, not written or draw(st.booleans())))
        written = True
    if states and draw(st.booleans()):
        ends = ["end_of_text"] if dialect == "cwm" else ["exit_normal", "exit_error", "exit_never"]
        states.append(State(draw(st.sampled_from(ends if forward else ["inv_exit_entry"]))))
    if dialect == "debugger":
        for _ in range(len(states) - 1):
            name = draw(st.sampled_from(names))
            actions.append(Action(name, draw(_texts()) if name == "breakpoint" else None))
    code = draw(_texts())
    entry_line = draw(st.integers(-1, code.count("\n")))
    return Episode(code, tuple(states), tuple(actions), entry_line)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(DIALECTS).flatmap(lambda dialect: st.tuples(st.just(dialect), episodes(dialect))))
def test_parse_inverts_serialize_on_arbitrary_payloads(case):
    dialect, episode = case
    text = serialize(episode, dialect)
    assert parse(text, dialect) == episode


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DIALECTS).flatmap(lambda dialect: st.tuples(st.just(dialect), episodes(dialect))))
def test_payloads_never_hold_a_token_and_action_sep_and_arg_sep_keep_cwms_meaning(case):
    """Every special token of the text is one the serializer wrote: no payload holds one (of either
    dialect), `<|action_sep|>` is always followed by a source line that ends its frame or precedes its
    value, and `<|arg_sep|>` always by a JSON-string value that ends a return/exception frame."""
    dialect, episode = case
    text = serialize(episode, dialect)
    tokens = re.findall(r"<\|(?!\|)[A-Za-z0-9_]+\|>", text)
    assert set(tokens) <= set(SPECIAL_TOKENS)
    frames = [state for state in episode.states if not state.is_end]
    assert tokens.count(ACTION_SEP) == len(frames)
    assert tokens.count(ARG_SEP) == sum(state.event in VALUED for state in frames)
    context = text[len(TRACE_CONTEXT_START) : text.index(FRAME_SEP)]
    assert context.count(START_MARKER) == (episode.entry_line >= 0)  # the code's own markers are escaped
    pieces = re.split(r"(<\|(?!\|)[A-Za-z0-9_]+\|>)", text)
    events = [token for token in tokens if token in EVENT_TOKENS.values()]
    positions = [i for i, piece in enumerate(pieces) if piece == ACTION_SEP]
    for position, event_token, state in zip(positions, events, frames, strict=True):
        assert unescape(pieces[position + 1]) == state.source
        following = pieces[position + 2]
        if state.event in VALUED:
            assert following == ARG_SEP and json.loads(unescape(pieces[position + 3])) == state.arg
            assert pieces[position + 4] == FRAME_SEP
        else:
            assert following == FRAME_SEP
        assert event_token == EVENT_TOKENS[state.event]


def test_policy_config_is_validated_with_value_errors():
    for bad in (
        dict(max_actions=0),
        dict(breakpoint_miss_rate=1.5),
        dict(version=""),
        dict(forward_mixture=((1.0, (("inv_step_into", 1.0),)),)),
        dict(inverse_mixture=((1.0, (("step_into", 1.0),)),)),
        dict(forward_mixture=((0.0, (("step_into", 1.0),)),)),
        dict(forward_mixture=((1.0, (("step_into", -1.0),)),)),
        dict(directions=("sideways",)),
    ):
        with pytest.raises(ValueError):
            PolicyConfig(**bad)
    assert PolicyConfig().policy_version != PolicyConfig(max_actions=7).policy_version
    assert PolicyConfig().policy_version == PolicyConfig().policy_version
