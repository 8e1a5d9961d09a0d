"""The forward and inverse state trees of one trace (docs/architecture.md §7), as flat integer arrays.

Forward tree. Node i is event i; node n (= number of events) is the exit pseudo-state. The states of a
function activation (its call, lines, exceptions and its return) are the children, in recorded order, of
the caller's node that was current when the call happened — its line node, except in odd cases where the
caller's latest node is an exception or call node. The root level is the entry activation, followed by
any other top-level activations (a generator entry's resumes, each up to its next yield or its end; a
generator closed after the entry returned), then the exit.
An activation is a call event up to the next return event of that frame, or up to its final exception
event (an exception after which the frame has no event, or only a new call: the tracer drops the
return-with-None that unwinding emits). A generator resume is a new activation (a `call` of the same
frame id) under the caller's current line; each `yield` is its activation's return node. An activation
cut short by truncation has no end node.

Guarantee: pre-order of the forward tree equals recorded order, so node i + 1 is the pre-order successor
of node i. The builders are linear in the number of events and never recurse.

Inverse tree. Every level is reversed; every forward node with children is duplicated as an
`inv_line_call` node whose children are the callee states, reversed, and its plain copy follows it; the
entry pseudo-state ends the root level. Inverse nodes are numbered in inverse pre-order, so node k + 1 is
the inverse pre-order successor of node k, node 0 is where an inverse walk starts (the entry's return, or
the last recorded root node of a truncated trace) and the last node is the entry pseudo-state.
"""

from dataclasses import dataclass

from pipeline.debugger.events import Trace, TraceShapeError

# Inverse node kinds (the forward kinds are the event kinds plus "exit").
INV_KIND = {"call": "inv_call", "line": "inv_line", "return": "inv_return", "exception": "inv_exception"}
INV_LINE_CALL = "inv_line_call"
INV_ENTRY = "inv_entry"


@dataclass(frozen=True, eq=False)
class ForwardTree:
    """Arrays over nodes 0..n (n = exit). -1 means none. Read-only by convention."""

    n: int  # number of events; node n is the exit pseudo-state
    parent: list[int]  # parent node (-1 at the root level)
    next_sib: list[int]  # next node at the same level (the last root node's is the exit)
    over: list[int]  # step_over target: next sibling, else the nearest ancestor's next sibling
    act_call: list[int]  # the call node of the node's activation
    act_end: list[int]  # the end node (return / final exception) of the node's activation, -1 if cut
    is_end: list[bool]  # the node ends its activation
    has_children: list[bool]
    lines_by_source: dict[str, list[int]]  # line nodes by exact source text, ascending

    @property
    def exit(self) -> int:
        return self.n


@dataclass(frozen=True, eq=False)
class InverseTree:
    """Arrays over inverse nodes in inverse pre-order; the last node is the entry pseudo-state."""

    kind: list[str]  # inv_call | inv_line | inv_line_call | inv_return | inv_exception | inv_entry
    event: list[int]  # the event (forward node) the inverse node shows; -1 for the entry
    parent: list[int]  # inverse parent: the inv_line_call node whose callee states hold it, or -1
    over: list[int]  # inv_step_over target
    call: list[int]  # inv_step_call target
    of_event: list[int]  # event -> its plain inverse node

    @property
    def entry(self) -> int:
        return len(self.kind) - 1


def build_forward(trace: Trace) -> ForwardTree:
    """The forward tree; raises TraceShapeError if an event belongs to no active frame."""
    kinds, frames = trace.kinds, trace.frames
    n = len(kinds)
    parent = [-1] * (n + 1)
    next_sib = [-1] * (n + 1)
    last_child = [-1] * (n + 1)
    act_call = [-1] * (n + 1)
    is_end = [False] * (n + 1)
    end_of_call: dict[int, int] = {}  # call node -> end node of its activation
    final = _final_exceptions(kinds, frames)
    root_tail = -1
    # The activation stack: parallel lists of frame id, parent node, call node, latest node.
    stack_frame: list[int] = []
    stack_parent: list[int] = []
    stack_call: list[int] = []
    stack_last: list[int] = []
    for i in range(n):
        kind = kinds[i]
        if kind == "call":
            p = stack_last[-1] if stack_last else -1
            stack_frame.append(frames[i])
            stack_parent.append(p)
            stack_call.append(i)
            stack_last.append(i)
            act_call[i] = i
        else:
            if not stack_frame or stack_frame[-1] != frames[i]:
                raise TraceShapeError(
                    "MalformedTrace",
                    f"event {i} ({kind}) belongs to frame {frames[i]}, which is not the "
                    f"innermost active frame (interleaved threads or a malformed trace)",
                )
            p = stack_parent[-1]
            act_call[i] = stack_call[-1]
            stack_last[-1] = i
            if kind == "return" or (kind == "exception" and final[i]):
                is_end[i] = True
                end_of_call[stack_call.pop()] = i
                stack_frame.pop()
                stack_parent.pop()
                stack_last.pop()
        parent[i] = p
        if p == -1:
            tail, root_tail = root_tail, i
        else:
            tail, last_child[p] = last_child[p], i
        if tail != -1:
            next_sib[tail] = i
    if root_tail != -1:
        next_sib[root_tail] = n
    act_end = [end_of_call.get(call, -1) for call in act_call]
    has_children = [child != -1 for child in last_child]
    over = [n] * (n + 1)
    for i in range(n):  # parents precede children, so over[parent] is known
        if next_sib[i] != -1:
            over[i] = next_sib[i]
        elif parent[i] != -1:
            over[i] = over[parent[i]]
    lines_by_source: dict[str, list[int]] = {}
    sources = trace.sources
    for i in range(n):
        if kinds[i] == "line":
            lines = lines_by_source.get(sources[i])
            if lines is None:
                lines_by_source[sources[i]] = [i]
            else:
                lines.append(i)
    return ForwardTree(
        n=n,
        parent=parent,
        next_sib=next_sib,
        over=over,
        act_call=act_call,
        act_end=act_end,
        is_end=is_end,
        has_children=has_children,
        lines_by_source=lines_by_source,
    )


def _final_exceptions(kinds: list[str], frames: list[int]) -> list[bool]:
    """final[i]: event i is an exception after which its frame has no event, or only a new call."""
    final = [False] * len(kinds)
    later: dict[int, str] = {}
    for i in range(len(kinds) - 1, -1, -1):
        if kinds[i] == "exception":
            final[i] = later.get(frames[i], "call") == "call"
        later[frames[i]] = kinds[i]
    return final


def build_inverse(trace: Trace, fwd: ForwardTree) -> InverseTree:
    """The inverse tree of a forward tree, in one backward pass over the events.

    Why one pass suffices: a forward subtree is the contiguous range [x, over[x] - 1], so walking the
    events backwards visits every level reversed with each callee's states before their calling
    line; the inv_line_call copy of x goes right before x's last descendant (outer copies first), and
    its plain copy comes at x's own place. In inverse pre-order, the first node after k's subtree —
    inv_step_over — is k + 1 for a plain node and the plain copy for an inv_line_call.
    """
    kinds, f_parent, f_over, has_children = trace.kinds, fwd.parent, fwd.over, fwd.has_children
    n = fwd.n
    copies_before: dict[int, list[int]] = {}  # last descendant -> calling nodes ending there, outer first
    for x in range(n):
        if has_children[x]:
            end = f_over[x] - 1
            if end in copies_before:
                copies_before[end].append(x)
            else:
                copies_before[end] = [x]
    inv_kind: list[str] = []
    inv_event: list[int] = []
    of_event = [-1] * n
    copy_of: dict[int, int] = {}  # calling node -> its inv_line_call node
    for e in range(n - 1, -1, -1):
        for x in copies_before.get(e, ()):
            copy_of[x] = len(inv_kind)
            inv_kind.append(INV_LINE_CALL)
            inv_event.append(x)
        of_event[e] = len(inv_kind)
        inv_kind.append(INV_KIND[kinds[e]])
        inv_event.append(e)
    entry = len(inv_kind)
    inv_kind.append(INV_ENTRY)
    inv_event.append(-1)
    parent = [-1] * (entry + 1)
    over = list(range(1, entry + 2))
    over[entry] = entry
    call = [entry] * (entry + 1)
    act_call = fwd.act_call
    for k in range(entry):
        e = inv_event[k]
        if f_parent[e] != -1:
            parent[k] = copy_of[f_parent[e]]
        if inv_kind[k] == INV_LINE_CALL:
            over[k] = of_event[e]
        target = of_event[act_call[e]]
        call[k] = target if target != k else over[k]  # on the call node itself: like inv_step_over
    return InverseTree(kind=inv_kind, event=inv_event, parent=parent, over=over, call=call, of_event=of_event)
