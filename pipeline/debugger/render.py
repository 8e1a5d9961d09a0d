"""Visited nodes -> language states, with the locals rule of docs/architecture.md §8 and the entry-line marker.

Valued states (return, exception and their inverses) carry no locals, as CWM's frames. The other states
write their full locals when `delta` is off (as CWM writes them), else — the tracegen extension — when the
state is the first, a call (inv_call), a breakpoint landing, in another frame than the previous state, or
when the last locals written belong to another frame; otherwise a delta against those last locals.
The entry line is the code line of the def that the walk starts in (-1 when the code does not hold it).
"""

from pipeline.debugger.events import Trace
from pipeline.debugger.language import VALUED, Action, Episode, State
from pipeline.debugger.trees import INV_ENTRY, ForwardTree, InverseTree


def _states(trace: Trace, visits: list[tuple[str, int]], actions: list[Action], delta: bool) -> tuple:
    """visits: (state kind, event index) per visited node; ("inv_exit_entry"|"exit_*", -1) for the end."""
    states = []
    previous_frame = written_frame = None
    frames, sources, local_maps, args = trace.frames, trace.sources, trace.locals, trace.args
    for position, (kind, event) in enumerate(visits):
        if event < 0:
            states.append(State(kind))
            continue
        frame = frames[event]
        if kind in VALUED:
            states.append(State(kind, sources[event], {}, args[event], True))
        else:
            full = (
                not delta
                or position == 0
                or kind in ("call", "inv_call")
                or frame != previous_frame
                or frame != written_frame
                or actions[position - 1].name == "breakpoint"
            )
            states.append(State(kind, sources[event], local_maps[event], None, full))
            written_frame = frame
        previous_frame = frame
    return tuple(states)


def forward_episode(
    trace: Trace, tree: ForwardTree, nodes: list[int], actions: list[Action], *, delta: bool = True
) -> Episode:
    end = "exit_" + trace.exit
    visits = [(end, -1) if node == tree.n else (trace.kinds[node], node) for node in nodes]
    entry = trace.code_line(trace.sources[tree.act_call[nodes[0]]])
    return Episode(trace.code, _states(trace, visits, actions, delta), tuple(actions), entry)


def inverse_episode(
    trace: Trace,
    forward: ForwardTree,
    tree: InverseTree,
    nodes: list[int],
    actions: list[Action],
    *,
    delta: bool = True,
) -> Episode:
    visits = [
        ("inv_exit_entry", -1) if tree.kind[node] == INV_ENTRY else (tree.kind[node], tree.event[node])
        for node in nodes
    ]
    entry = trace.code_line(trace.sources[forward.act_call[tree.event[nodes[0]]]])
    return Episode(trace.code, _states(trace, visits, actions, delta), tuple(actions), entry)


def plain_episode(trace: Trace) -> Episode:
    """The whole trace as the cwm dialect's plain trace: every event, full locals, and the end of the
    entry scope unless the trace was truncated."""
    visits = [(kind, event) for event, kind in enumerate(trace.kinds)]
    states = _states(trace, visits, [], delta=False)
    if trace.exit != "never":
        states += (State("end_of_text"),)
    return Episode(trace.code, states, (), trace.code_line(trace.sources[0]))
