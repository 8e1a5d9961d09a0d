"""Debugger actions as transitions on the state trees (docs/architecture.md §7). Pure, O(1) or O(log n) each.

Forward actions, from node i of the forward tree (node n is the exit pseudo-state):

- ``step_into``: node i + 1, the pre-order successor — the next recorded event, at any depth. Only
  step_into replays the trace.
- ``step_over``: the next node at the same level; at the end of a level, one level up (the caller line's
  next sibling, and so on); after the root level's last node, the exit. Never goes deeper than i.
- ``step_return``: the end node of i's activation (its return, or its final exception when the frame
  ends by an uncaught exception). On an end node it moves like step_over.
- ``breakpoint SRC``: the first line node after i, at any depth, whose source text equals SRC exactly
  (leading whitespace included); if there is none, the exit.
- ``continue``: the exit.

Inverse actions, from node k of the inverse tree (its last node is the entry pseudo-state):

- ``inv_step_into``: node k + 1, the inverse pre-order successor; from an inv_line_call it descends to
  the callee's last state (its inv_return or final inv_exception).
- ``inv_step_over``: the next node at the same inverse level (from an inv_line_call, its plain inv_line
  copy); at the end of a level, one level up; after the root level, the entry pseudo-state.
- ``inv_step_call``: the call node of k's activation, whose locals are the inputs to predict. On that
  call node it moves like inv_step_over.

Edge cases, one answer each:

- Every action on the exit (forward) or on the entry pseudo-state (inverse) stays there; the policy
  stops a trajectory when it gets there.
- Root level: step_over / step_return from the entry's return go to the exit; inv_step_over /
  inv_step_call from the entry's inv_call go to the entry pseudo-state.
- step_return on a return node (or a final exception node, or a generator's yield) moves like step_over:
  to the next sibling, which can be a second call made by the same caller line.
- A frame that ends by an exception ends with its exception node: step_return lands there (pdb stops at
  the return event with value None that settrace emits while unwinding; the tracer drops that event).
- Generators: every resume is a new activation (a `call` node with the frame's locals at the resume,
  under the caller line that resumed it) and every `yield` is that activation's return node, so
  step_over/step_return stop at the yield and inv_step_call lands on the resume's call node (the frame's
  first call holds its arguments).
- An activation cut by truncation has no end node: step_return from inside it goes to the exit.
- A breakpoint whose text never comes again goes to the exit (whose token is exit_never for a truncated
  trace). Breakpoints match line nodes only, never call/return/exception nodes with the same text.
"""

from bisect import bisect_right

from pipeline.debugger.trees import ForwardTree, InverseTree

FORWARD_ACTIONS = ("step_into", "step_over", "step_return", "breakpoint", "continue")
INVERSE_ACTIONS = ("inv_step_into", "inv_step_over", "inv_step_call")


def step_into(tree: ForwardTree, node: int) -> int:
    return node + 1 if node < tree.n else tree.n


def step_over(tree: ForwardTree, node: int) -> int:
    return tree.over[node]


def step_return(tree: ForwardTree, node: int) -> int:
    if node >= tree.n:
        return tree.n
    if tree.is_end[node]:
        return tree.over[node]
    end = tree.act_end[node]
    return tree.n if end == -1 else end


def breakpoint_(tree: ForwardTree, node: int, source: str) -> int:
    lines = tree.lines_by_source.get(source)
    if not lines:
        return tree.n
    at = bisect_right(lines, node)
    return lines[at] if at < len(lines) else tree.n


def continue_(tree: ForwardTree, node: int) -> int:
    return tree.n


def inv_step_into(tree: InverseTree, node: int) -> int:
    return min(node + 1, tree.entry)


def inv_step_over(tree: InverseTree, node: int) -> int:
    return tree.over[node]


def inv_step_call(tree: InverseTree, node: int) -> int:
    return tree.call[node]


def apply_forward(tree: ForwardTree, node: int, action: str, target: str | None = None) -> int:
    """The node an action lands on; ValueError for an unknown action or a breakpoint without target."""
    if action == "step_into":
        return step_into(tree, node)
    if action == "step_over":
        return step_over(tree, node)
    if action == "step_return":
        return step_return(tree, node)
    if action == "breakpoint":
        if target is None:
            raise ValueError("breakpoint needs a target source line")
        return breakpoint_(tree, node, target)
    if action == "continue":
        return continue_(tree, node)
    raise ValueError(f"unknown forward action {action!r}: expected one of {', '.join(FORWARD_ACTIONS)}")


def apply_inverse(tree: InverseTree, node: int, action: str) -> int:
    if action == "inv_step_into":
        return inv_step_into(tree, node)
    if action == "inv_step_over":
        return inv_step_over(tree, node)
    if action == "inv_step_call":
        return inv_step_call(tree, node)
    raise ValueError(f"unknown inverse action {action!r}: expected one of {', '.join(INVERSE_ACTIONS)}")
