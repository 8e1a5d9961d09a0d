"""The formal language of trajectories (docs/architecture.md §8): `serialize` and its exact inverse `parse`, in two
dialects.

States are written as the Code World Model's trace frames, with CWM's token meanings (its prompting guide,
"Trace Prediction"): a frame is an *observation* then an *action* — `<|action_sep|>` starts the source
line, `<|arg_sep|>` starts a return/exception value, `<|frame_sep|>` ends the step. The grammar, side by
side with CWM's and with a worked example in both dialects, is schemas/trajectories.md.

    CONTEXT := <|trace_context_start|> CODE <|frame_sep|>     (the entry line marked `  # << START_OF_TRACE`)
    FRAME   := OBSERVED LOCALS <|action_sep|> SRC             OBSERVED: call, line, inv_call, inv_line,
                                                              inv_line_call
             | VALUED <|action_sep|> SRC <|arg_sep|> VALUE    VALUED: return, exception, inv_return,
                                                              inv_exception

- `debugger` dialect (the `trajectories` table): debugger actions are extension tokens *between* frames,
  never `<|action_sep|>` or `<|arg_sep|>`:
      TEXT := CONTEXT FRAME <|frame_sep|> (ACTION FRAME <|frame_sep|>)* [ACTION END] <|trace_end|>
      ACTION := <|step_into|> | ... | <|breakpoint|> SRC;  END := <|exit_normal|> | ... | <|inv_exit_entry|>
  A trajectory cut at the policy's step cap has no ACTION END: `<|trace_end|>` follows its last frame.
- `cwm` dialect (`tracegen export --dialect cwm`): a plain trace, exactly CWM's layout, no actions:
      TEXT := CONTEXT (FRAME <|frame_sep|>)* [<|end_of_text|>]
  `<|end_of_text|>` when the entry scope was left (CWM's end of execution); none for a truncated trace.

LOCALS is a JSON object of repr strings: the frame's full locals (`full=True`, as CWM writes them), or the
tracegen extension, a delta against the last locals written: `{"..": "..", name: new repr, ..., gone:
null}`. VALUE is a JSON string. Valued frames carry no locals (CWM's layout): their states have empty
`locals` and `full=True`.

Escaping: payloads (CODE, SRC, JSON, breakpoint targets) never contain a special token: each `<|` is
written `<||` (a token is always `<|` then a letter). In CODE, a run of two or more `<` before
` START_OF_TRACE` gets one more `<`, so the marker this module writes is the only one. `parse` undoes both.
"""

import json
import re
from functools import lru_cache
from json.encoder import encode_basestring as _enc
from typing import NamedTuple

TRACE_CONTEXT_START = "<|trace_context_start|>"
FRAME_SEP = "<|frame_sep|>"
CALL_SEP = "<|call_sep|>"
LINE_SEP = "<|line_sep|>"
RETURN_SEP = "<|return_sep|>"
EXCEPTION_SEP = "<|exception_sep|>"
ARG_SEP = "<|arg_sep|>"
ACTION_SEP = "<|action_sep|>"
END_OF_TEXT = "<|end_of_text|>"
INV_CALL_SEP = "<|inv_call_sep|>"
INV_LINE_SEP = "<|inv_line_sep|>"
INV_LINE_CALL_SEP = "<|inv_line_call_sep|>"
INV_RETURN_SEP = "<|inv_return_sep|>"
INV_EXCEPTION_SEP = "<|inv_exception_sep|>"
TRACE_END = "<|trace_end|>"
START_MARKER = "  # << START_OF_TRACE"

DIALECTS = ("debugger", "cwm")
FORWARD_EVENTS = {"call": CALL_SEP, "line": LINE_SEP, "return": RETURN_SEP, "exception": EXCEPTION_SEP}
INVERSE_EVENTS = {
    "inv_call": INV_CALL_SEP,
    "inv_line": INV_LINE_SEP,
    "inv_line_call": INV_LINE_CALL_SEP,
    "inv_return": INV_RETURN_SEP,
    "inv_exception": INV_EXCEPTION_SEP,
}
EVENT_TOKENS = {**FORWARD_EVENTS, **INVERSE_EVENTS}
VALUED = frozenset({"return", "exception", "inv_return", "inv_exception"})
FORWARD_ENDS = {"exit_normal": "<|exit_normal|>", "exit_error": "<|exit_error|>", "exit_never": "<|exit_never|>"}
INVERSE_ENDS = {"inv_exit_entry": "<|inv_exit_entry|>"}
ENDS = {**FORWARD_ENDS, **INVERSE_ENDS}
CWM_END = "end_of_text"  # the cwm dialect's end state: the entry scope was left
ACTIONS = {
    name: f"<|{name}|>"
    for name in (
        "step_into",
        "step_over",
        "step_return",
        "breakpoint",
        "continue",
        "inv_step_into",
        "inv_step_over",
        "inv_step_call",
    )
}
CWM_TOKENS = (TRACE_CONTEXT_START, FRAME_SEP, ACTION_SEP, RETURN_SEP, CALL_SEP, LINE_SEP, EXCEPTION_SEP, ARG_SEP)
SPECIAL_TOKENS = tuple(
    dict.fromkeys([*CWM_TOKENS, END_OF_TEXT, *INVERSE_EVENTS.values(), *ENDS.values(), TRACE_END, *ACTIONS.values()])
)
_BY_TOKEN = {token: name for name, token in {**EVENT_TOKENS, **ENDS, **ACTIONS, CWM_END: END_OF_TEXT}.items()}
_EVENT_TOKENS = frozenset(EVENT_TOKENS.values())
_ACTION_TOKENS = frozenset(ACTIONS.values())
_END_TOKENS = frozenset(ENDS.values())
_TOKEN = re.compile(r"<\|(?!\|)([A-Za-z0-9_]+)\|>")
_MARKER_RUN = re.compile(r"(?<!<)(<{2,}) START_OF_TRACE")
_ESCAPED_MARKER_RUN = re.compile(r"(?<!<)<(<{2,}) START_OF_TRACE")
_DELTA = ".."
_DELTA_HEAD = '{"..": ".."'


class LanguageError(ValueError):
    """The text does not follow the grammar; the message says where."""


class State(NamedTuple):
    """One state: the event's name, its source line, its absolute locals, its arg (return/exception).

    `full` says whether the text writes the whole locals dict (else a delta against the last locals
    written). Valued states (return, exception) and end states carry no locals (`{}`, `full=True`).
    (A NamedTuple: cheap to build, immutable, compared by value.)
    """

    event: str
    source: str = ""
    locals: dict = {}
    arg: str | None = None
    full: bool = True

    @property
    def is_end(self) -> bool:
        return self.event in ENDS or self.event == CWM_END


class Action(NamedTuple):
    name: str
    target: str | None = None  # the breakpoint's source text; None for the other actions


class Episode(NamedTuple):
    """A trajectory (or, in the cwm dialect, a plain trace) in structured form.

    `entry_line` is the 0-based index of the code line marked `# << START_OF_TRACE` (the def line of the
    function the walk starts in), -1 when no line of the code is that line.
    """

    code: str
    states: tuple
    actions: tuple
    entry_line: int = -1

    @property
    def ended(self) -> bool:
        """True when the last state is an end state (False: cut at the step cap, or a truncated trace)."""
        return bool(self.states) and self.states[-1].is_end


def escape(payload: str) -> str:
    return payload.replace("<|", "<||")


def unescape(payload: str) -> str:
    return payload.replace("<||", "<|")


def serialize(episode: Episode, dialect: str = "debugger") -> str:
    """The text of an episode in `dialect`; ValueError if the episode is not well formed for it."""
    states, actions = episode.states, episode.actions
    cwm = _dialect(dialect) == "cwm"
    if cwm and actions:
        raise ValueError("the cwm dialect writes plain traces: an episode with actions needs the debugger dialect")
    if not cwm and (not states or len(actions) != len(states) - 1):
        raise ValueError("an episode needs at least one state and exactly one action between states")
    out = [_context_text(episode.code, episode.entry_line)]
    append = out.append
    written: dict | None = None
    last = len(states) - 1
    for position, (event, source, current, arg, full) in enumerate(states):
        if position and not cwm:
            name, target = actions[position - 1]
            token = ACTIONS.get(name)
            if token is None:
                raise ValueError(f"unknown action {name!r}")
            if (target is not None) != (name == "breakpoint"):
                raise ValueError("a breakpoint needs a target source line; other actions have none")
            append(token if target is None else token + escape(target))
        token = EVENT_TOKENS.get(event)
        if token is None:
            end = _end_token(event, cwm)
            if position != last or position == 0:
                raise ValueError("an end state can only be the last state, after at least one frame")
            append(end)
            return "".join(out) if cwm else "".join(out) + TRACE_END
        if event in VALUED:
            if current or not full:
                raise ValueError(f"a {event} state carries no locals (CWM's frame layout)")
            value = "null" if arg is None else _enc(arg)
            append(f"{token}{ACTION_SEP}{source.replace('<|', '<||')}{ARG_SEP}{value.replace('<|', '<||')}{FRAME_SEP}")
            continue
        if _DELTA in current:
            raise ValueError(f"a variable named {_DELTA!r} cannot be written")
        if full:
            local_text = "{" + ", ".join([f"{_enc(k)}: {_enc(v)}" for k, v in current.items()]) + "}"
        elif written is None:
            raise ValueError("a delta needs locals written by an earlier state")
        else:
            local_text = _delta_text(current, written)
        append(f"{token}{local_text.replace('<|', '<||')}{ACTION_SEP}{source.replace('<|', '<||')}{FRAME_SEP}")
        written = current
    return "".join(out) if cwm else "".join(out) + TRACE_END


@lru_cache(maxsize=256)
def _context_text(code: str, entry_line: int) -> str:
    """CONTEXT, escaped: the same for every trajectory of a trace, so built once per trace."""
    return TRACE_CONTEXT_START + escape(marked_context(code, entry_line)) + FRAME_SEP


def _dialect(dialect: str) -> str:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {', '.join(DIALECTS)}")
    return dialect


def _end_token(event: str, cwm: bool) -> str:
    if cwm:
        if event != CWM_END:
            raise ValueError(f"the cwm dialect ends with {CWM_END!r}, not {event!r}")
        return END_OF_TEXT
    if event not in ENDS:
        raise ValueError(f"unknown event {event!r}")
    return ENDS[event]


def _delta_text(current: dict, previous: dict) -> str:
    """`{"..": "..", changed: repr, ..., gone: null}`, byte-identical to json.dumps(..., ensure_ascii=False)."""
    parts = [_DELTA_HEAD]
    parts += [f"{_enc(k)}: {_enc(v)}" for k, v in current.items() if previous.get(k) != v]
    parts += [f"{_enc(k)}: null" for k in previous if k not in current]
    return ", ".join(parts) + "}"


def marked_context(code: str, entry_line: int) -> str:
    """The code as CWM's context: line `entry_line` ends with `  # << START_OF_TRACE`, no other marker."""
    code = _MARKER_RUN.sub(r"<\1 START_OF_TRACE", code)
    if entry_line < 0:
        return code
    lines = code.split("\n")
    if entry_line >= len(lines):
        raise ValueError(f"entry_line {entry_line} is past the code's {len(lines)} lines")
    lines[entry_line] += START_MARKER
    return "\n".join(lines)


def unmarked_context(context: str) -> tuple[str, int]:
    """The inverse of `marked_context`: (code, entry_line)."""
    at = context.find(START_MARKER)
    entry_line = -1
    if at != -1:
        entry_line = context.count("\n", 0, at)
        context = context[:at] + context[at + len(START_MARKER) :]
    return _ESCAPED_MARKER_RUN.sub(r"\1 START_OF_TRACE", context), entry_line


def split_prompt(text: str) -> tuple[str, str]:
    """(prompt, completion): the context up to its closing <|frame_sep|> — CWM's trace-prediction prompt —
    and the frames after it."""
    if not text.startswith(TRACE_CONTEXT_START) or FRAME_SEP not in text:
        raise LanguageError("a text starts with <|trace_context_start|> and its context ends with <|frame_sep|>")
    at = text.index(FRAME_SEP) + len(FRAME_SEP)
    return text[:at], text[at:]


def parse(text: str, dialect: str = "debugger") -> Episode:
    """The exact inverse of `serialize`: `parse(serialize(e, d), d) == e`; LanguageError on bad text."""
    cwm = _dialect(dialect) == "cwm"
    parts = _TOKEN.split(text)
    # parts = [payload, name, payload, name, payload, ...]; payload i follows token name i.
    tokens = [("<|%s|>" % parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]
    if parts[0] != "":
        raise LanguageError("text before <|trace_context_start|>")
    reader = _Reader(tokens)
    code, entry_line = unmarked_context(reader.take(TRACE_CONTEXT_START, payload=True))
    reader.take(FRAME_SEP)
    states, actions = [], []
    written = None  # the last locals written: what a delta is against
    while True:
        if cwm:
            if reader.done():
                break
            if reader.next_token() == END_OF_TEXT:
                reader.take(END_OF_TEXT)
                states.append(State(CWM_END))
                break
        elif states:
            token = reader.next_token()
            if token == TRACE_END:
                reader.take(TRACE_END)
                break
            if token not in _ACTION_TOKENS:
                raise LanguageError(f"token {reader.position}: expected an action or {TRACE_END}, got {token}")
            name = _BY_TOKEN[token]
            target = reader.take(token, payload=name == "breakpoint")
            actions.append(Action(name, target if name == "breakpoint" else None))
            if reader.next_token() in _END_TOKENS:
                token = reader.next_token()
                reader.take(token)
                states.append(State(_BY_TOKEN[token]))
                reader.take(TRACE_END)
                break
        state = _read_frame(reader, written)
        states.append(state)
        if state.event not in VALUED:
            written = state.locals
    if reader.position != len(tokens):
        raise LanguageError(f"token {reader.position}: text after the end")
    _check_direction(states, actions)
    return Episode(code, tuple(states), tuple(actions), entry_line)


def parse_state(text: str, written: dict | None) -> State:
    """One state as a span of a trajectory writes it — a frame through `<|frame_sep|>`, or an end token
    (with or without the closing `<|trace_end|>`) — whose delta locals are against `written` (the last
    locals written before it); LanguageError when it is not exactly one state. (How an evaluation reads a
    model's predicted state.)"""
    parts = _TOKEN.split(text)
    if parts[0] != "":
        raise LanguageError("text before the state's first token")
    reader = _Reader([("<|%s|>" % parts[i], parts[i + 1]) for i in range(1, len(parts), 2)])
    token = reader.next_token()
    if token in _END_TOKENS:
        reader.take(token)
        state = State(_BY_TOKEN[token])
        if not reader.done():
            reader.take(TRACE_END)
    else:
        state = _read_frame(reader, written)
    if not reader.done():
        raise LanguageError(f"token {reader.position}: text after the state")
    return state


def _read_frame(reader: "_Reader", written: dict | None) -> State:
    """One FRAME and its closing <|frame_sep|>."""
    token = reader.next_token()
    if token not in _EVENT_TOKENS:
        raise LanguageError(f"token {reader.position}: expected an event, got {token}")
    event = _BY_TOKEN[token]
    if event in VALUED:
        reader.take(token)
        source = reader.take(ACTION_SEP, payload=True)
        arg = _json(reader.take(ARG_SEP, payload=True), reader.position)
        if not (arg is None or isinstance(arg, str)):
            raise LanguageError(f"token {reader.position}: a return/exception value must be a JSON string")
        state = State(event, source, {}, arg, True)
    else:
        local_map, full = _parse_locals(reader.take(token, payload=True), written, reader.position)
        state = State(event, reader.take(ACTION_SEP, payload=True), local_map, None, full)
    reader.take(FRAME_SEP)
    return state


def _check_direction(states: list, actions: list) -> None:
    kinds = {
        "inverse" if state.event in INVERSE_EVENTS or state.event in INVERSE_ENDS else "forward" for state in states
    }
    kinds |= {"inverse" if action.name.startswith("inv_") else "forward" for action in actions}
    if len(kinds) > 1:
        raise LanguageError("the text mixes forward and inverse events or actions")


class _Reader:
    def __init__(self, tokens):
        self.tokens = tokens
        self.position = 0

    def done(self) -> bool:
        return self.position >= len(self.tokens)

    def next_token(self) -> str:
        if self.done():
            raise LanguageError("the text ends before its end token")
        return self.tokens[self.position][0]

    def take(self, token: str, payload: bool = False) -> str:
        found = self.next_token()
        if found != token:
            raise LanguageError(f"token {self.position}: expected {token}, got {found}")
        text = self.tokens[self.position][1]
        if not payload and text:
            raise LanguageError(f"token {self.position}: unexpected text after {token}: {text[:40]!r}")
        self.position += 1
        return unescape(text)


def _json(payload: str, position: int):
    try:
        return json.loads(payload)
    except ValueError as error:
        raise LanguageError(f"token {position}: bad JSON ({error})") from None


def _parse_locals(payload: str, previous: dict | None, position: int) -> tuple[dict, bool]:
    value = _json(payload, position)
    if not isinstance(value, dict):
        raise LanguageError(f"token {position}: locals must be a JSON object")
    if value.get(_DELTA) != _DELTA:
        if not all(isinstance(text, str) for text in value.values()):
            raise LanguageError(f"token {position}: full locals must map names to repr strings")
        return value, True
    if previous is None:
        raise LanguageError(f"token {position}: a delta with no locals written before")
    result = dict(previous)
    for name, text in value.items():
        if name == _DELTA:
            continue
        if text is None:
            if name not in result:
                raise LanguageError(f"token {position}: {name!r} is unbound but was not bound before")
            del result[name]
        elif isinstance(text, str):
            result[name] = text
        else:
            raise LanguageError(f"token {position}: locals values must be repr strings or null")
    return result, False


def pretty(text: str, show_code: bool = True) -> str:
    """For reading (e.g. `tracegen inspect`): a line break after each step; optionally the code elided."""
    start = text.find(FRAME_SEP)
    if not show_code and text.startswith(TRACE_CONTEXT_START) and start != -1:
        code_lines = text[len(TRACE_CONTEXT_START) : start].count("\n")
        text = f"{TRACE_CONTEXT_START}<{code_lines} lines of code>" + text[start:]
    return text.replace(FRAME_SEP, FRAME_SEP + "\n")
