"""The `sys.settrace` tracer: records call/line/return/exception events of the traced code only.

Each event is written as one compact JSON array (see `EVENT_FIELDS`) to a line sink as it happens, so
whatever was recorded survives a budget stop or a kill. The tracer never raises into the traced code
except to end it when a budget runs out (`BudgetExceeded`, a BaseException). Standard library only.

A trace holds the events of one thread, the one that makes the entry call. When traced code runs in another
thread during the call (a `threading.Thread`, a `ThreadPoolExecutor` worker), that thread's events are not
recorded and the trace ends at the entry thread's next event, exit `never`, truncated, reason `threads`: the
state tree has no place for interleaved threads, and what was recorded up to there is one consistent thread.
"""

import json
import sys
import threading
import time

from tracers.saferepr import Limits, SafeRepr

TRACER_VERSION = "3"  # 2: values of user classes rendered from their state; 3: a second thread ends the trace
EVENT_FIELDS = (
    "index",
    "event",
    "frame_id",
    "parent_frame_id",
    "depth",
    "lineno",
    "function",
    "source",
    "locals",
    "arg",
)
# Type ids, not types: `type(v) in (int, ...)` compares with ==, which a metaclass can define.
_IMMUTABLE = frozenset(map(id, (int, float, str, bytes, bool, type(None), complex)))
_encode = json.JSONEncoder(separators=(",", ":")).encode  # built once: json.dumps(**kw) rebuilds it per call
THREADS = "threads"  # the truncation reason of a trace whose traced code also ran in another thread


class Budgets:
    """Per-trace budgets: past any of them the trace ends with exit `never` and `truncated`."""

    __slots__ = ("max_events", "max_bytes", "max_seconds")

    def __init__(self, max_events=10_000, max_bytes=8 << 20, max_seconds=5.0):
        if max_events < 1 or max_bytes < 1 or max_seconds <= 0:
            raise ValueError("trace budgets must be positive")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds


class BudgetExceeded(BaseException):
    """Raised into the traced code to end it; a BaseException so `except Exception` cannot swallow it."""


class Outcome:
    """How a traced call ended: exit (normal|error|never), truncation and why, the entry's result."""

    __slots__ = ("exit", "truncated", "reason", "n_events", "n_bytes")

    def __init__(self):
        self.exit = "never"
        self.truncated = False
        self.reason = None
        self.n_events = 0
        self.n_bytes = 0

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class Tracer:
    """Traces one call. `is_traced(code)` selects frames; `source_line(code, lineno)` gives line text."""

    def __init__(self, is_traced, source_line, write, flush=None, budgets=None, limits=None):
        self._is_traced = is_traced
        self._source_line = source_line
        self._write = write
        self._flush = flush or (lambda: None)
        self._budgets = budgets or Budgets()
        self._repr = SafeRepr(limits or Limits())
        self._traced_codes = {}
        self._frames = {}  # frame -> [frame_id, depth, last_event, immutable repr cache]
        self._deadline = 0.0
        self._hook = self._on_new_frame
        self._other_thread_hook = self._on_other_thread_frame
        self._other_thread_ran = False  # traced code ran in another thread: the entry thread's next event ends
        self.outcome = Outcome()
        self.result = None  # what the call returned or raised (for the parity check)

    def run(self, fn, args=(), kwargs=None):
        """Call fn(*args, **kwargs) under the tracer and return the Outcome; never raises."""
        outcome = self.outcome
        self._deadline = time.monotonic() + self._budgets.max_seconds
        threading.settrace(self._other_thread_hook)
        sys.settrace(self._hook)
        try:
            self.result = fn(*args, **(kwargs or {}))
            outcome.exit = "normal"
        except BudgetExceeded:
            pass
        except BaseException as error:
            self.result = error
            outcome.exit = "error"
        finally:
            hook_intact = sys.gettrace() is self._hook
            sys.settrace(None)
            threading.settrace(None)
        if not outcome.truncated and not hook_intact:
            self._end("tracer_disabled")
        if not outcome.truncated and self._other_thread_ran:
            self._end(THREADS)
        if outcome.truncated:
            outcome.exit = "never"
        return outcome

    # -- hooks -------------------------------------------------------------------------------------
    def _on_new_frame(self, frame, event, arg):
        try:
            if not self._is_traced_code(frame.f_code) or self.outcome.truncated:
                return None
            state = self._frames.get(frame)
            if state is None:
                parent_id, depth = self._parent_of(frame)
                state = self._frames[frame] = [len(self._frames), depth, None, {}, parent_id]
            self._emit(frame, state, "call", None)
            return self._on_event
        except BudgetExceeded:
            raise
        except BaseException as error:  # RecursionError near the limit, MemoryError, ...
            return self._fail(error)

    def _on_other_thread_frame(self, frame, event, arg):
        """The global hook of threads started during the call: records nothing, notes traced code there."""
        try:
            if self._is_traced_code(frame.f_code):
                self._other_thread_ran = True
        except BaseException:
            pass
        return None

    def _is_traced_code(self, code):
        traced = self._traced_codes.get(code)
        if traced is None:
            traced = self._traced_codes[code] = bool(self._is_traced(code))
        return traced

    def _on_event(self, frame, event, arg):
        try:
            state = self._frames.get(frame)
            if state is None or self.outcome.truncated:
                return None
            if event == "return" and state[2] == "exception":
                state[2] = "unwound"  # the frame ends with its exception node; no return node
                return self._on_event
            if event == "exception":
                arg = arg[1] if arg[1] is not None else arg[0]
            self._emit(frame, state, event, arg)
            return self._on_event
        except BudgetExceeded:
            raise
        except BaseException as error:
            return self._fail(error)

    # -- recording ---------------------------------------------------------------------------------
    def _parent_of(self, frame):
        caller = frame.f_back
        while caller is not None:
            state = self._frames.get(caller)
            if state is not None:
                return state[0], state[1] + 1
            caller = caller.f_back
        return None, 0

    def _emit(self, frame, state, event, arg):
        outcome = self.outcome
        budgets = self._budgets
        if self._other_thread_ran:
            self._stop(THREADS)
        if outcome.n_events >= budgets.max_events:
            self._stop("max_events")
        if time.monotonic() > self._deadline:
            self._stop("max_seconds")
        state[2] = event
        code = frame.f_code
        lineno = frame.f_lineno
        record = [
            outcome.n_events,
            event,
            state[0],
            state[4],
            state[1],
            lineno,
            code.co_qualname,
            self._source_line(code, lineno),
            self._locals(frame, state[3]),
            None if event in ("call", "line") else self._repr(arg),
        ]
        line = _encode(record)
        if outcome.n_bytes + len(line) > budgets.max_bytes:
            self._stop("max_bytes")
        self._write(line)
        outcome.n_events += 1
        outcome.n_bytes += len(line) + 1

    def _locals(self, frame, cache):
        """[[name, repr], ...] in the frame's order; immutable values keep their repr while unchanged."""
        pairs = []
        namespace = frame.f_locals
        if not issubclass(type(namespace), dict):  # a class body's __prepare__ mapping: its methods are user code
            return pairs
        for name, value in dict.items(namespace):
            hit = cache.get(name)
            if hit is not None and hit[0] is value:
                text = hit[1]
            else:
                text = self._repr(value)
                if id(type(value)) in _IMMUTABLE:
                    cache[name] = (value, text)
            pairs.append([name, text])
        return pairs

    def _end(self, reason):
        self.outcome.truncated = True
        self.outcome.reason = reason

    def _stop(self, reason):
        self._end(reason)
        self._flush()  # the traced code may swallow the stop and hang: keep what was recorded
        raise BudgetExceeded(reason)

    def _fail(self, error):
        """The tracer itself failed: end the trace as truncated instead of corrupting it."""
        try:
            recursion = isinstance(error, RecursionError)
            self._end("recursion_limit" if recursion else "tracer_error:" + type(error).__name__)
        except BaseException:
            pass
        return None


def source_lines(code):
    """The lines of a source string as the compiler numbers them: only \\n, \\r\\n and \\r end a line
    (`str.splitlines` also splits at U+2028, U+0085 and form feeds, which may sit inside a string literal)."""
    return code.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def call_arguments(input_text, namespace):
    """(args, kwargs) of the call `entry(<input_text>)`, evaluated in `namespace`.

    The closing parenthesis is on a line of its own, so argument text that ends with a `# comment` means
    what it means in a real call instead of hiding the parenthesis.
    """
    return eval(compile("(lambda *a, **k: (a, k))(%s\n)" % input_text, "<input>", "eval"), namespace)


def trace_source(code, entry="f", input="", filename="<tracegen>", budgets=None, limits=None):
    """Trace `entry(<input>)` of a source string in this process; returns {outcome..., events}.

    A convenience for tests and notebooks: no sandbox, no fork. The pipeline uses
    `tracers.function_runner`, which adds process isolation around the same Tracer.
    """
    namespace = {"__name__": "__tracegen__"}
    exec(compile(code, filename, "exec"), namespace)
    args, kwargs = call_arguments(input, namespace)
    lines = source_lines(code)
    events = []
    tracer = Tracer(
        is_traced=lambda c: c.co_filename == filename,
        source_line=lambda c, n: lines[n - 1] if 0 < n <= len(lines) else "",
        write=events.append,
        budgets=budgets,
        limits=limits,
    )
    outcome = tracer.run(namespace[entry], args, kwargs)
    result = outcome.as_dict()
    result["events"] = [dict(zip(EVENT_FIELDS, json.loads(line), strict=True)) for line in events]
    for event in result["events"]:
        event["locals"] = dict(event["locals"])
    return result
