"""Benchmark items as a model sees them in training, and the sandbox that checks its answers (no torch here).

Each item is traced by the functions job's own path (`trace_functions`: the tracer in the sandbox, the same
settings), and its prompts are cut from the trajectories the training data is made of, by the same renderer
and serializer (pipeline/debugger/render.py, language.py):

- output: the forward trajectory's opening — the context and the entry call's frame — then `<|step_return|>`;
  the model writes the return state, whose value is the answer. The `breakpoint` route, as the paper's:
  `<|breakpoint|>` on the line the entry returns from, the model writes that line's state, then
  `<|step_return|>` and the return state (only for items where that walk lands on the entry's return: a
  breakpoint line first reached in a deeper recursion is skipped there, `route_applies` false).
- input: the inverse trajectory's opening — the context and the return state, its value `output` — then
  `<|inv_step_call|>`; the model writes the call state, whose locals are the arguments.

Answers are compared as CruxEval does: both sides parsed as Python literals (`ast.literal_eval`) and equal;
a side that does not parse is wrong. Predicted arguments are executed: `entry(<predicted>)` runs as a
function record in the sandbox (the record budgets and sandbox limits of any record), and passes iff it
returns normally a value equal to `output`. A prediction that does not parse, raises, exits the process,
loops or allocates without bound fails its item; nothing it does stops the evaluation.
"""

import ast
from dataclasses import dataclass, replace

from pipeline.debugger.actions import apply_forward, apply_inverse
from pipeline.debugger.events import Trace, TraceShapeError
from pipeline.debugger.language import ACTIONS, Action, LanguageError, State, parse_state, serialize
from pipeline.debugger.render import forward_episode, inverse_episode
from pipeline.debugger.trees import ForwardTree, build_forward, build_inverse
from pipeline.format.documents import trajectory_spans
from pipeline.sandbox import Sandbox
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.trace_functions import ReprLimits, TraceSettings, trace_functions

UNIT = "benchmark"
# Caps of the executed call's return value (the tracer renders it): wide, so an answer is compared whole.
RESULT_REPRS = {"max_chars": 4096, "max_items": 256, "max_depth": 16}
STEP_RETURN = ACTIONS["step_return"]
INV_STEP_CALL = Action("inv_step_call")


@dataclass(frozen=True)
class ItemPrompts:
    """One item's prompts (None, with `problem` saying why, when its trace gives none) and its horizon."""

    item: FunctionRecord
    output: str | None = None  # context, the entry's call frame, <|step_return|>
    breakpoint: str | None = None  # context, the call frame, <|breakpoint|> on the return line
    input: str | None = None  # context, the return frame holding `output`, <|inv_step_call|>
    cwm: str | None = None  # CWM's trace-prediction prompt: the context and the call frame (the cwm dialect)
    trace_length: int | None = None  # events between the entry's call and its return
    problem: str | None = None
    output_agrees: bool = True  # the traced return value equals `output` (else the item itself is wrong)

    @property
    def route_applies(self) -> bool:
        return self.breakpoint is not None


def literal(text: str | None) -> tuple[bool, object]:
    """(True, value) when `text` is a Python literal, else (False, None)."""
    if text is None:
        return False, None
    try:
        return True, ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def same_value(predicted: str | None, expected: str) -> bool:
    """CruxEval's check: both texts parse as Python literals and the values are equal."""
    ok, value = literal(predicted)
    ok_expected, expected_value = literal(expected)
    try:
        return ok and ok_expected and bool(value == expected_value)
    except (RecursionError, MemoryError):
        return False


def trace_items(items: tuple[FunctionRecord, ...], sandbox: Sandbox, settings: TraceSettings) -> list[ItemPrompts]:
    """Every item traced in the sandbox (the functions job's stage) and its prompts, in item order."""
    return [
        ItemPrompts(item, problem=f"the item could not be traced ({row})")
        if isinstance(row, str)
        else item_prompts(item, row)
        for item, row in zip(items, traced_rows(list(items), sandbox, settings), strict=True)
    ]


def traced_rows(records: list[FunctionRecord], sandbox: Sandbox, settings: TraceSettings) -> list[dict | str]:
    """Per record, in order, its `traces` row from the functions job's stage, or why it has none."""
    traced = trace_functions(records, sandbox, settings, UNIT)
    rows = {row["source_id"]: row for row in traced.rows("traces")}
    failures = {row["source_id"]: f"{row['error_type']}: {row['message']}" for row in traced.rows("failures")}
    return [rows.get(record.id) or failures.get(record.id, "no trace") for record in records]


def item_prompts(item: FunctionRecord, row: dict) -> ItemPrompts:
    """The prompts of an item from its `traces` row; a problem when its entry call did not return."""
    assert item.output is not None
    walked = entry_return(row)
    if isinstance(walked, str):
        return ItemPrompts(item, problem=walked)
    trace, forward, end = walked
    returned = trace.args[end]
    agrees = same_value(returned, item.output)
    output_actions = [Action("step_return")]
    opening = forward_episode(trace, forward, _walk(forward, output_actions), output_actions)
    output_prompt = _opening(serialize(opening))
    route_actions = [Action("breakpoint", trace.sources[end]), Action("step_return")]
    route = _walk(forward, route_actions)
    breakpoint_prompt = None
    if route[-1] == end:  # not when the return line is first reached in a deeper call (a recursion)
        breakpoint_prompt = _opening(serialize(forward_episode(trace, forward, route, route_actions)))
    inverse = build_inverse(trace, forward)
    back = inverse_episode(trace, forward, inverse, [0, apply_inverse(inverse, 0, "inv_step_call")], [INV_STEP_CALL])
    shown = returned if agrees else item.output  # the tracer's rendering when it is the benchmark's value
    back = back._replace(states=(back.states[0]._replace(arg=shown), *back.states[1:]))
    return ItemPrompts(
        item,
        output=output_prompt,
        breakpoint=breakpoint_prompt,
        input=_opening(serialize(back)),
        cwm=serialize(opening._replace(states=opening.states[:1], actions=()), "cwm"),
        trace_length=end - 1,
        output_agrees=agrees,
    )


def _walk(forward: ForwardTree, actions: list[Action]) -> list[int]:
    """The nodes a forward walk from the entry call visits, by the debugger's own transitions."""
    nodes = [0]
    for action in actions:
        nodes.append(apply_forward(forward, nodes[-1], action.name, action.target))
    return nodes


def _opening(text: str) -> str:
    """A trajectory's prompt (the context and its first state) and its first action: its first two spans."""
    return "".join(span.text for span in trajectory_spans(text)[:2])


def returned_value(state_text: str) -> str | None:
    """The value of a predicted return state (None: not one return state)."""
    try:
        state = parse_state(state_text, None)
    except LanguageError:
        return None
    return state.arg if state.event == "return" else None


def predicted_arguments(state_text: str) -> dict | None:
    """The locals of a predicted call state, name -> repr text (None: not one call state with full locals)."""
    try:
        state: State = parse_state(state_text, None)
    except LanguageError:
        return None
    return dict(state.locals) if state.event == "inv_call" else None


def call_input(code: str, entry: str, arguments: dict) -> str:
    """The argument text of `entry(...)` that binds each parameter to its predicted value: positional
    parameters in order (by keyword after one is missing), `*args` unpacked, keyword-only ones by name,
    `**kwargs` unpacked; names the entry's signature does not have are dropped. Without a top-level `def` of
    the entry in the code, every value is passed by keyword."""
    values = {name: _argument(text) for name, text in arguments.items()}
    signature = _signature(code, entry)
    if signature is None:
        return ", ".join(f"{name}={value}" for name, value in values.items())
    positional, star, keyword_only, double_star = signature
    parts, by_keyword = [], False
    for name in positional:
        if name not in values:
            by_keyword = True
        else:
            parts.append(f"{name}={values[name]}" if by_keyword else values[name])
    if star in values:
        parts.append(f"*{values[star]}")
    parts += [f"{name}={values[name]}" for name in keyword_only if name in values]
    if double_star in values:
        parts.append(f"**{values[double_star]}")
    return ", ".join(parts)


def _argument(text: str) -> str:
    """A predicted value as one argument: as written when it is a literal's own repr, else parenthesised
    (with the closing parenthesis on its own line, so a trailing `# comment` cannot hide it)."""
    ok, value = literal(text)
    if ok and repr(value) == text.strip():
        return text.strip()
    return f"({text}\n)"


def _signature(code: str, entry: str) -> tuple[list[str], str | None, list[str], str | None] | None:
    """(positional names, *args name, keyword-only names, **kwargs name) of the code's last top-level
    `def entry`, read from its syntax tree (nothing runs); None when there is none."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry:
            found = node.args
    if found is None:
        return None
    return (
        [a.arg for a in (*found.posonlyargs, *found.args)],
        found.vararg.arg if found.vararg else None,
        [a.arg for a in found.kwonlyargs],
        found.kwarg.arg if found.kwarg else None,
    )


def execution_settings(settings: TraceSettings) -> TraceSettings:
    """The settings an executed prediction runs under: the record's, with the return value rendered whole."""
    return replace(settings, reprs=ReprLimits(**RESULT_REPRS, mode=settings.reprs.mode))


def execute(
    calls: list[tuple[FunctionRecord, str]], sandbox: Sandbox, settings: TraceSettings
) -> list[tuple[bool, str]]:
    """Run each (item, argument text) as `entry(<argument text>)` in the sandbox; per call (passed, what
    happened): passed iff the call returned normally a value equal to the item's `output` (as literals)."""
    records = [
        FunctionRecord(f"{item.id}#{n}", item.code, text, item.entry, f"{item.input_ref}#{n}")
        for n, (item, text) in enumerate(calls)
    ]
    results = []
    for row, (item, _) in zip(traced_rows(records, sandbox, execution_settings(settings)), calls, strict=True):
        walked = row if isinstance(row, str) else entry_return(row)
        if isinstance(walked, str):
            results.append((False, walked))
            continue
        trace, _, end = walked
        value = trace.args[end]
        assert item.output is not None
        results.append((same_value(value, item.output), f"returned {(value or '')[:200]}"))
    return results


def entry_return(row: dict) -> tuple[Trace, ForwardTree, int] | str:
    """A `traces` row's trace, its forward tree and the node of the entry call's return; or why there is
    none (the call raised, ran past the record budgets, or the trace cannot be walked)."""
    try:
        trace = Trace.from_row(row)
        forward = build_forward(trace)
    except TraceShapeError as error:
        return f"its trace cannot be walked ({error})"
    end = forward.act_end[0] if forward.n else -1
    if trace.exit != "normal" or end == -1 or trace.kinds[end] != "return":
        return f"the entry call did not return (exit {trace.exit}) within the record budgets"
    return trace, forward, end
