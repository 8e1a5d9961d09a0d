"""The formal language of trajectories (DESIGN.md §7): `serialize` and its exact inverse `parse`.

Layout (no whitespace between tokens; the grammar is documented with a worked example in
schemas/trajectories.md):

    TEXT   := <|trace_context_start|> CODE STATE (<|action_sep|> ACTION STATE)* <|trace_end|>
    STATE  := <|frame_sep|> EVENT <|src_sep|> SRC <|arg_sep|> LOCALS [<|arg_sep|> ARG]
            | <|frame_sep|> END                      (only as the last state)
    ACTION := <|step_into|> | <|step_over|> | <|step_return|> | <|continue|> | <|breakpoint|> SRC
            | <|inv_step_into|> | <|inv_step_over|> | <|inv_step_call|>
    EVENT  := <|call_sep|> | <|line_sep|> | <|return_sep|> | <|exception_sep|>            (forward)
            | <|inv_call_sep|> | <|inv_line_sep|> | <|inv_line_call_sep|> | <|inv_return_sep|>
            | <|inv_exception_sep|>                                                      (inverse)
    END    := <|exit_normal|> | <|exit_error|> | <|exit_never|> | <|inv_exit_entry|>

ARG (return value or exception repr, as a JSON string) follows only return/exception events. LOCALS is
a JSON object of repr strings: the full dict (`full=True`), or a delta against the previous state's
locals: `{"..": "..", name: new repr, ..., gone: null}` — changed and new names with their reprs, names
no longer bound as `null`, `".."` standing for everything else. A trajectory that stopped at its step
cap ends with `<|trace_end|>` right after its last real state (no END).

Escaping: the payloads (CODE, SRC, JSON) never contain a special token: each `<|` in a payload is
written `<||`, and a token is always `<|` followed by a letter, so `parse` can split unambiguously and
undo the escape. Parsed locals compare as mappings (their order is not part of a state).
"""

import json
import re
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
SRC_SEP = "<|src_sep|>"
INV_CALL_SEP = "<|inv_call_sep|>"
INV_LINE_SEP = "<|inv_line_sep|>"
INV_LINE_CALL_SEP = "<|inv_line_call_sep|>"
INV_RETURN_SEP = "<|inv_return_sep|>"
INV_EXCEPTION_SEP = "<|inv_exception_sep|>"
EXIT_NORMAL = "<|exit_normal|>"
EXIT_ERROR = "<|exit_error|>"
EXIT_NEVER = "<|exit_never|>"
INV_EXIT_ENTRY = "<|inv_exit_entry|>"
TRACE_END = "<|trace_end|>"

FORWARD_EVENTS = {"call": CALL_SEP, "line": LINE_SEP, "return": RETURN_SEP, "exception": EXCEPTION_SEP}
INVERSE_EVENTS = {
    "inv_call": INV_CALL_SEP,
    "inv_line": INV_LINE_SEP,
    "inv_line_call": INV_LINE_CALL_SEP,
    "inv_return": INV_RETURN_SEP,
    "inv_exception": INV_EXCEPTION_SEP,
}
ENDS = {
    "exit_normal": EXIT_NORMAL,
    "exit_error": EXIT_ERROR,
    "exit_never": EXIT_NEVER,
    "inv_exit_entry": INV_EXIT_ENTRY,
}
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
WITH_ARG = frozenset({"return", "exception", "inv_return", "inv_exception"})
EVENT_TOKENS = {**FORWARD_EVENTS, **INVERSE_EVENTS}
SPECIAL_TOKENS = tuple(
    dict.fromkeys(
        [
            TRACE_CONTEXT_START,
            FRAME_SEP,
            CALL_SEP,
            LINE_SEP,
            RETURN_SEP,
            EXCEPTION_SEP,
            ARG_SEP,
            ACTION_SEP,
            SRC_SEP,
            *INVERSE_EVENTS.values(),
            *ENDS.values(),
            TRACE_END,
            *ACTIONS.values(),
        ]
    )
)
_BY_TOKEN = {token: name for name, token in {**EVENT_TOKENS, **ENDS, **ACTIONS}.items()}
_TOKEN = re.compile(r"<\|(?!\|)([A-Za-z0-9_]+)\|>")
_DELTA = ".."
_DELTA_HEAD = '{"..": ".."'


class LanguageError(ValueError):
    """The text does not follow the grammar; the message says where."""


class State(NamedTuple):
    """One state: the event's name, its source line, its absolute locals, its arg (return/exception).

    `full` says whether the text writes the whole locals dict (else a delta against the previous
    state). Pseudo-states (exit_*, inv_exit_entry) have empty source and locals. (A NamedTuple: cheap to
    build, immutable, compared by value.)
    """

    event: str
    source: str = ""
    locals: dict = {}
    arg: str | None = None
    full: bool = True

    @property
    def is_end(self) -> bool:
        return self.event in ENDS


class Action(NamedTuple):
    name: str
    target: str | None = None  # the breakpoint's source text; None for the other actions


class Episode(NamedTuple):
    """A trajectory in structured form: code context, states, and the actions between them."""

    code: str
    states: tuple
    actions: tuple

    @property
    def ended(self) -> bool:
        """True when the last state is the exit / entry pseudo-state (False: cut at the step cap)."""
        return bool(self.states) and self.states[-1].is_end


def escape(payload: str) -> str:
    return payload.replace("<|", "<||")


def unescape(payload: str) -> str:
    return payload.replace("<||", "<|")


def serialize(episode: Episode) -> str:
    """The text of an episode; ValueError if the episode is not well formed."""
    states, actions = episode.states, episode.actions
    if not states or len(actions) != len(states) - 1:
        raise ValueError("an episode needs at least one state and exactly one action between states")
    out = [TRACE_CONTEXT_START, episode.code.replace("<|", "<||")]
    append = out.append
    previous = None
    last = len(states) - 1
    for position, (event, source, current, arg, full) in enumerate(states):
        if position:
            name, target = actions[position - 1]
            token = ACTIONS.get(name)
            if token is None:
                raise ValueError(f"unknown action {name!r}")
            if (target is not None) != (name == "breakpoint"):
                raise ValueError("a breakpoint needs a target source line; other actions have none")
            append(ACTION_SEP + token if target is None else ACTION_SEP + token + target.replace("<|", "<||"))
        token = EVENT_TOKENS.get(event)
        if token is None:
            if event not in ENDS:
                raise ValueError(f"unknown event {event!r}")
            if position != last:
                raise ValueError("an exit/entry pseudo-state can only be the last state")
            append(FRAME_SEP + ENDS[event])
            break
        if _DELTA in current:
            raise ValueError(f"a variable named {_DELTA!r} cannot be written")
        if full:
            local_text = "{" + ", ".join([f"{_enc(k)}: {_enc(v)}" for k, v in current.items()]) + "}"
        elif previous is None:
            raise ValueError("the first state must write its locals in full")
        else:
            local_text = _delta_text(current, previous)
        append(f"{FRAME_SEP}{token}{SRC_SEP}{source.replace('<|', '<||')}{ARG_SEP}{local_text.replace('<|', '<||')}")
        if event in WITH_ARG:
            append(ARG_SEP + ("null" if arg is None else _enc(arg).replace("<|", "<||")))
        previous = current
    append(TRACE_END)
    return "".join(out)


def _delta_text(current: dict, previous: dict) -> str:
    """`{"..": "..", changed: repr, ..., gone: null}`, byte-identical to json.dumps(..., ensure_ascii=False)."""
    parts = [_DELTA_HEAD]
    parts += [f"{_enc(k)}: {_enc(v)}" for k, v in current.items() if previous.get(k) != v]
    parts += [f"{_enc(k)}: null" for k in previous if k not in current]
    return ", ".join(parts) + "}"


def parse(text: str) -> Episode:
    """The exact inverse of `serialize`: `parse(serialize(e)) == e`; LanguageError on bad text."""
    parts = _TOKEN.split(text)
    # parts = [payload, name, payload, name, payload, ...]; payload i follows token name i.
    tokens = [("<|%s|>" % parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]
    if parts[0] != "":
        raise LanguageError("text before <|trace_context_start|>")
    reader = _Reader(tokens)
    code = reader.take(TRACE_CONTEXT_START, payload=True)
    states, actions = [], []
    previous = None
    while True:
        reader.take(FRAME_SEP)
        token = reader.next_token()
        if token in ENDS.values():
            reader.take(token)
            states.append(State(_BY_TOKEN[token]))
            reader.take(TRACE_END)
            break
        event = _BY_TOKEN.get(token)
        if event is None or token not in EVENT_TOKENS.values():
            raise LanguageError(f"token {reader.position}: expected an event or an exit, got {token}")
        reader.take(token)
        source = reader.take(SRC_SEP, payload=True)
        local_map, full = _parse_locals(reader.take(ARG_SEP, payload=True), previous, reader.position)
        arg = None
        if event in WITH_ARG:
            arg = _json(reader.take(ARG_SEP, payload=True), reader.position)
            if not (arg is None or isinstance(arg, str)):
                raise LanguageError(f"token {reader.position}: an arg must be a JSON string or null")
        states.append(State(event, source, local_map, arg, full))
        previous = local_map
        if reader.next_token() == TRACE_END:
            reader.take(TRACE_END)
            break
        reader.take(ACTION_SEP)
        token = reader.next_token()
        name = _BY_TOKEN.get(token)
        if name is None or token not in ACTIONS.values():
            raise LanguageError(f"token {reader.position}: expected an action, got {token}")
        target = reader.take(token, payload=name == "breakpoint")
        actions.append(Action(name, target if name == "breakpoint" else None))
    if reader.position != len(tokens):
        raise LanguageError(f"token {reader.position}: text after <|trace_end|>")
    kinds = {
        "forward"
        if state.event in FORWARD_EVENTS or state.event in ("exit_normal", "exit_error", "exit_never")
        else "inverse"
        for state in states
    }
    kinds |= {"inverse" if action.name.startswith("inv_") else "forward" for action in actions}
    if len(kinds) > 1:
        raise LanguageError("the text mixes forward and inverse events or actions")
    return Episode(code, tuple(states), tuple(actions))


class _Reader:
    def __init__(self, tokens):
        self.tokens = tokens
        self.position = 0

    def next_token(self) -> str:
        if self.position >= len(self.tokens):
            raise LanguageError("the text ends before <|trace_end|>")
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
        raise LanguageError(f"token {position}: a delta with no previous state")
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
    """For reading (e.g. `tracegen inspect`): one state per line; optionally without the code context."""
    body = text
    if not show_code and text.startswith(TRACE_CONTEXT_START):
        start = text.find(FRAME_SEP)
        code_lines = text[len(TRACE_CONTEXT_START) : start].count("\n")
        body = f"{TRACE_CONTEXT_START}<{code_lines} lines of code>" + text[start:]
    return body.replace(FRAME_SEP, "\n" + FRAME_SEP)
