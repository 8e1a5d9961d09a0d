"""Visited nodes -> language states, with the locals-delta rule of DESIGN.md §7.

Forward: a state writes its full locals when it is the first state, a call, in another frame than the
previous state (a return to the caller, a step into a callee) or the landing of a breakpoint; otherwise a
delta against the previous state. Inverse: full at the first state, at an inv_call, and in another frame
than the previous (later) state; otherwise a delta against that later state.
"""

from pipeline.debugger.events import Trace
from pipeline.debugger.language import Action, Episode, State
from pipeline.debugger.trees import INV_ENTRY, ForwardTree, InverseTree

_WITH_ARG = frozenset({"return", "exception"})


def forward_episode(trace: Trace, tree: ForwardTree, nodes: list[int], actions: list[Action]) -> Episode:
    states = []
    previous_frame = None
    kinds, frames, sources, local_maps, args = trace.kinds, trace.frames, trace.sources, trace.locals, trace.args
    for position, node in enumerate(nodes):
        if node == tree.n:
            states.append(State("exit_" + trace.exit))
            continue
        kind, frame = kinds[node], frames[node]
        full = position == 0 or kind == "call" or frame != previous_frame or actions[position - 1].name == "breakpoint"
        states.append(State(kind, sources[node], local_maps[node], args[node] if kind in _WITH_ARG else None, full))
        previous_frame = frame
    return Episode(trace.code, tuple(states), tuple(actions))


def inverse_episode(trace: Trace, tree: InverseTree, nodes: list[int], actions: list[Action]) -> Episode:
    states = []
    previous_frame = None
    frames, sources, local_maps, args = trace.frames, trace.sources, trace.locals, trace.args
    for position, node in enumerate(nodes):
        kind = tree.kind[node]
        if kind == INV_ENTRY:
            states.append(State("inv_exit_entry"))
            continue
        event = tree.event[node]
        frame = frames[event]
        full = position == 0 or kind == "inv_call" or frame != previous_frame
        arg = args[event] if kind in ("inv_return", "inv_exception") else None
        states.append(State(kind, sources[event], local_maps[event], arg, full))
        previous_frame = frame
    return Episode(trace.code, tuple(states), tuple(actions))
