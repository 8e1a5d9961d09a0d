"""The forward and inverse state trees of one trace (DESIGN.md §6), as flat integer arrays.

Forward tree. Node i is event i; node n (= number of events) is the exit pseudo-state. The states of a
function activation (its call, lines, exceptions and its return) are the children, in recorded order, of
the caller's node that was current when the call happened — its line node, except in odd cases where the
caller's latest node is an exception or call node. The root level is the entry activation, followed by
any stray top-level activations (e.g. a generator closed after the entry returned), then the exit.
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

    n: int                  # number of events; node n is the exit pseudo-state
    parent: list[int]       # parent node (-1 at the root level)
    next_sib: list[int]     # next node at the same level (the last root node's is the exit)
    over: list[int]         # step_over target: next sibling, else the nearest ancestor's next sibling
    act_call: list[int]     # the call node of the node's activation
    act_end: list[int]      # the end node (return / final exception) of the node's activation, -1 if cut
    is_end: list[bool]      # the node ends its activation
    has_children: list[bool]
    last_child: list[int]
    prev_sib: list[int]
    lines_by_source: dict[str, list[int]]  # line nodes by exact source text, ascending

    @property
    def exit(self) -> int:
        return self.n


@dataclass(frozen=True, eq=False)
class InverseTree:
    """Arrays over inverse nodes in inverse pre-order; the last node is the entry pseudo-state."""

    kind: list[str]         # inv_call | inv_line | inv_line_call | inv_return | inv_exception | inv_entry
    event: list[int]        # the event (forward node) the inverse node shows; -1 for the entry
    parent: list[int]
    next_sib: list[int]
    over: list[int]         # inv_step_over target
    call: list[int]         # inv_step_call target
    of_event: list[int]     # event -> its plain inverse node

    @property
    def entry(self) -> int:
        return len(self.kind) - 1


def build_forward(trace: Trace) -> ForwardTree:
    """The forward tree; raises TraceShapeError if an event belongs to no active frame."""
    kinds, frames = trace.kinds, trace.frames
    n = len(kinds)
    parent = [-1] * (n + 1)
    next_sib = [-1] * (n + 1)
    prev_sib = [-1] * (n + 1)
    last_child = [-1] * (n + 1)
    act_call = [-1] * (n + 1)
    act_end = [-1] * (n + 1)
    is_end = [False] * (n + 1)
    has_children = [False] * (n + 1)
    final = _final_exceptions(kinds, frames)
    root_tail = -1
    # The activation stack, one entry per active frame: [frame id, parent node, own nodes].
    stack: list[list] = []
    for i in range(n):
        kind = kinds[i]
        if kind == "call":
            p = stack[-1][2][-1] if stack else -1
            activation = [frames[i], p, [i]]
            stack.append(activation)
        else:
            if not stack or stack[-1][0] != frames[i]:
                raise TraceShapeError(
                    "MalformedTrace", f"event {i} ({kind}) belongs to frame {frames[i]}, which is not the "
                    f"innermost active frame (interleaved threads or a malformed trace)")
            activation = stack[-1]
            p = activation[1]
            activation[2].append(i)
        parent[i] = p
        act_call[i] = activation[2][0]
        if p == -1:
            tail, root_tail = root_tail, i
        else:
            tail, last_child[p] = last_child[p], i
            has_children[p] = True
        if tail != -1:
            next_sib[tail] = i
            prev_sib[i] = tail
        if kind == "return" or (kind == "exception" and final[i]):
            is_end[i] = True
            for node in stack.pop()[2]:
                act_end[node] = i
    if root_tail != -1:
        next_sib[root_tail] = n
        prev_sib[n] = root_tail
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
            lines_by_source.setdefault(sources[i], []).append(i)
    return ForwardTree(n=n, parent=parent, next_sib=next_sib, over=over, act_call=act_call, act_end=act_end,
                       is_end=is_end, has_children=has_children, last_child=last_child, prev_sib=prev_sib,
                       lines_by_source=lines_by_source)


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
    """The inverse tree of a forward tree (iterative; the work stack grows with depth only)."""
    kinds = trace.kinds
    n = fwd.n
    inv_kind: list[str] = []
    inv_event: list[int] = []
    inv_parent: list[int] = []
    of_event = [-1] * n
    has_children, last_child, prev_sib = fwd.has_children, fwd.last_child, fwd.prev_sib
    # Work items: (forward node, inverse parent, plain): visit `node` and then its previous siblings;
    # plain=True means the inv_line_call copy of `node` is done and its plain copy comes next.
    work: list[tuple[int, int, bool]] = [(prev_sib[n], -1, False)]
    while work:
        node, ip, plain = work.pop()
        if node == -1:
            continue
        if has_children[node] and not plain:
            inv_kind.append(INV_LINE_CALL)
            inv_event.append(node)
            inv_parent.append(ip)
            work.append((node, ip, True))
            work.append((last_child[node], len(inv_kind) - 1, False))
            continue
        of_event[node] = len(inv_kind)
        inv_kind.append(INV_KIND[kinds[node]])
        inv_event.append(node)
        inv_parent.append(ip)
        work.append((prev_sib[node], ip, False))
    inv_kind.append(INV_ENTRY)
    inv_event.append(-1)
    inv_parent.append(-1)
    m = len(inv_kind)
    next_sib = [-1] * m
    tails: dict[int, int] = {}
    for k in range(m):
        tail = tails.get(inv_parent[k], -1)
        if tail != -1:
            next_sib[tail] = k
        tails[inv_parent[k]] = k
    entry = m - 1
    over = [entry] * m
    for k in range(m):
        if next_sib[k] != -1:
            over[k] = next_sib[k]
        elif inv_parent[k] != -1:
            over[k] = over[inv_parent[k]]
    call = list(over)
    act_call = fwd.act_call
    for k in range(m - 1):
        target = of_event[act_call[inv_event[k]]]
        if target != k:  # on the call node itself, inv_step_call moves like inv_step_over
            call[k] = target
    return InverseTree(kind=inv_kind, event=inv_event, parent=inv_parent, next_sib=next_sib, over=over,
                       call=call, of_event=of_event)
