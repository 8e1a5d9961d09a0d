"""Baselines that say what an evaluation score means: predictions made without a model, scored by `tracegen
evaluate` on exactly the cuts the model is scored on (same trajectories, same actions, same truth).

- `copy`: the next state is the current one, unchanged (event, source line, locals, arg).
- `next_line`: the current locals (the last locals written) at the code line after the current one — before it
  for inverse actions — with event `line` (`inv_line`) and no arg. The current line is the first code line whose
  text is the current state's source; the next (previous) line is the nearest non-blank one; when there is none,
  the source stays the current one.
- `oracle_structure`: the true next event and source line with the current locals and no arg (an end state is
  its own prediction): its score is how much of a model's is control flow rather than values.

A valued state (return, exception) carries no locals, so a baseline predicting one gets `{}` as the language
writes it.
"""

from pipeline.debugger.actions import INVERSE_ACTIONS
from pipeline.debugger.language import VALUED, Episode, State

BASELINES = ("copy", "next_line", "oracle_structure")


def neighbour_line(code_lines: list[str], source: str, step: int) -> str:
    """The nearest non-blank code line `step` (+1 or -1) away from the first line whose text is `source`;
    `source` itself when it is not a code line or has no such neighbour."""
    try:
        at = code_lines.index(source) + step
    except ValueError:
        return source
    while 0 <= at < len(code_lines):
        if code_lines[at].strip():
            return code_lines[at]
        at += step
    return source


def baseline_states(episode: Episode, k: int, written: dict | None) -> dict[str, State]:
    """Each baseline's prediction of the state that action k leads to, from state k and `written` (the last
    locals written before it)."""
    current, truth = episode.states[k], episode.states[k + 1]
    inverse = episode.actions[k].name in INVERSE_ACTIONS
    held = dict(written or {})
    line = neighbour_line(episode.code.splitlines(), current.source, -1 if inverse else 1)
    if truth.is_end:
        structure = State(truth.event)
    else:
        structure = State(truth.event, truth.source, {} if truth.event in VALUED else held)
    return {
        "copy": current,
        "next_line": State("inv_line" if inverse else "line", line, held),
        "oracle_structure": structure,
    }
