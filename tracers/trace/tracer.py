"""The `sys.settrace` tracer: records call/line/return/exception events of the traced code only.

Each event is written as one compact JSON array (see `EVENT_FIELDS`) to a line sink as it happens, so
whatever was recorded survives a budget stop or a kill. The tracer never raises into the traced code
except to end it when a budget runs out (`BudgetExceeded`, a BaseException). Standard library only.

Locals are written in full (`[[name, repr], ...]`, the frame's order) at a frame's first event and whenever
its names change (one bound, one deleted); at its other events only what changed since the frame's previous
event is written, as an object `{name: repr}` of names that event already had (`{}`: nothing changed).
`expand_locals` (and the host's strict parser) turns that back into the full list, so the `traces` table
holds every event's full locals. A value's repr is kept while the value is the same immutable object, or
the same flat container showing the same immutable items (`tracers.reprs.reprcache`), and rendered again
otherwise. The byte budget counts every event as if its locals were written in full.

A trace holds the events of one thread, the one that makes the entry call. When traced code runs in another
thread during the call (a `threading.Thread`, a `ThreadPoolExecutor` worker), that thread's events are not
recorded and the trace ends at the entry thread's next event, exit `never`, truncated, reason `threads`: the
state tree has no place for interleaved threads, and what was recorded up to there is one consistent thread.

Forgery. The traced code runs in this process and can always lie about its own trace (docs/sandbox.md,
"Residual trust"), but cheap patches do not make a trace look complete. The hooks that `sys.gettrace()` and
`frame.f_trace` hand out are opaque C wrappers (no `__self__`, `__closure__` or `__globals__` to walk); the
JSON encoders are C encoders built at import (`tracers.json_writers`); in the sandbox the runner runs sealed
copies of these modules (`tracers.guard.seal`: private globals and builtins, so replacing `builtins.repr`,
`json.dumps` or a module's functions or classes changes nothing the tracer calls). While a call is traced,
the audit guard (`tracers.trace.tamper`) refuses the ways to the hooks and their state, and the trace ends
`tampered:<event>`. A trace whose hook was replaced anyway, whose
frames stopped reporting (a frame left without its return event, `f_trace_lines` switched off) or whose
`threading` hook was removed ends with reason `tracer_disabled`.
"""

import dis
import sys
import threading
import time
from itertools import repeat

from tracers.json_writers import compact, quote
from tracers.reprs.reprcache import signature, unchanged
from tracers.reprs.saferepr import Limits, SafeRepr
from tracers.trace.tamper import arm_guard, disarm_guard, opaque

TRACER_VERSION = "6"  # 2: user classes from their state; 3: a second thread ends the trace; 4: caps marked, guarded;
# 5: a frame that ran code after its exception (`with`, `finally`, bare `raise`) ends with that exception;
# 6: a repository's generator functions are entries (tracers.suite.entry_tracer)
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
THREADS = "threads"  # the truncation reason of a trace whose traced code also ran in another thread
DISABLED = "tracer_disabled"  # the hook was replaced or frames stopped reporting: events are missing
_CLOSED = frozenset(("return", "unwound"))  # the last event of every frame of a call that ended by itself
_RETURNS = frozenset(("RETURN_VALUE", "RETURN_CONST"))  # with the yields: where a `return` event is not an unwind


def yield_offsets(code):
    """The offsets at which a `return` event of a frame running `code` is a yield (the frame is suspended, to be
    resumed with a new `call`): each YIELD_VALUE, and the instruction after it (3.13 reports a yield at the
    RESUME after it)."""
    found, previous = set(), None
    for op in dis.get_instructions(code):
        if op.opname == "YIELD_VALUE" or previous == "YIELD_VALUE":
            found.add(op.offset)
        previous = op.opname
    return frozenset(found)


def unwinds(frame, code, offsets):
    """Whether the `return` event of `frame` (running `code`) is the frame unwinding with an exception rather
    than returning or yielding: settrace and PY_UNWIND report both as `return` with None. It unwinds when its
    last instruction is no return or yield (a bare `raise`, a `with` whose __exit__ let the exception through,
    the end of a `finally`). `offsets` caches each code's return and yield offsets."""
    found = offsets.get(code)
    if found is None:
        returns = (op.offset for op in dis.get_instructions(code) if op.opname in _RETURNS)
        found = offsets[code] = yield_offsets(code).union(returns)
    return frame.f_lasti not in found


def _frame_locals_type():
    return type(sys._getframe().f_locals)


# What a function frame's f_locals is: a dict (a snapshot) up to 3.12, a FrameLocalsProxy from 3.13 (PEP 667).
_FRAME_LOCALS = _frame_locals_type()


_monotonic = time.monotonic
_NoneType = type(None)
_UNCACHED = object()  # the value of a cache entry whose repr is rendered again at every event
_NOTHING = repeat(_UNCACHED)  # a frame's previous values when its names changed: none is the same


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

    __slots__ = ("exit", "truncated", "reason", "n_events", "n_bytes", "n_capped")

    def __init__(self):
        self.exit = "never"
        self.truncated = False
        self.reason = None
        self.n_events = 0
        self.n_bytes = 0
        self.n_capped = 0  # values in the recorded events that a repr cap cut (their text holds `…`)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class Tracer:
    """Traces one call. `is_traced(code)` selects frames; `source_line(code, lineno)` gives line text.

    Events come from `sys.settrace`; tracers.trace.monitoring.MonitoringTracer feeds the same capture from
    `sys.monitoring` (3.12+)."""

    backend = "settrace"

    def __init__(self, is_traced, source_line, write, flush=None, budgets=None, limits=None):
        self._is_traced = is_traced
        self._source_line = source_line
        self._write = write
        self._flush = flush or (lambda: None)
        self._budgets = budgets or Budgets()
        self._repr = SafeRepr(limits or Limits())
        self._traced_codes = {}
        self._frames = {}  # frame -> state, see _new_state
        self._sources = {}  # code -> {lineno: the source line as a JSON string}
        self._return_offsets = {}  # code -> offsets of its return and yield instructions (`unwinds`)
        self._names = {}  # local name -> its JSON string
        self._max_items = self._repr.limits.max_items
        self._deadline = 0.0
        self._hook = opaque(self._on_new_frame)
        self._local_hook = opaque(self._on_event)
        self._other_thread_hook = opaque(self._on_other_thread_frame)
        self._other_thread_ran = False  # traced code ran in another thread: the entry thread's next event ends
        self.outcome = Outcome()
        self.result = None  # what the call returned or raised (for the parity check)

    def run(self, fn, args=(), kwargs=None):
        """Call fn(*args, **kwargs) under the tracer and return the Outcome; never raises."""
        outcome = self.outcome
        self._deadline = time.monotonic() + self._budgets.max_seconds
        self._install()
        if outcome.truncated:  # the backend could not start (tracers.trace.monitoring: no free tool id)
            outcome.exit = "never"
            return outcome
        token = arm_guard(self._tampered, threading.get_ident())
        try:
            self.result = fn(*args, **(kwargs or {}))
            outcome.exit = "normal"
        except BudgetExceeded:
            pass
        except BaseException as error:  # TracerTampered too: the trace is already cut
            self.result = error
            outcome.exit = "error"
        finally:
            disarm_guard(token)
            hooks_intact = self._uninstall()
        if not outcome.truncated and not (hooks_intact and self._frames_closed()):
            self._end(DISABLED)
        if not outcome.truncated and self._other_thread_ran:
            self._end(THREADS)
        if outcome.truncated:
            outcome.exit = "never"
        return outcome

    def _install(self):
        """Start delivering events (this backend: sys.settrace, and threading's hook for new threads)."""
        threading.settrace(self._other_thread_hook)
        sys.settrace(self._hook)

    def _uninstall(self):
        """Stop delivering events; returns whether the hooks were still this tracer's."""
        intact = sys.gettrace() is self._hook and threading.gettrace() is self._other_thread_hook
        sys.settrace(None)
        threading.settrace(None)
        return intact

    def _frames_closed(self):
        """Whether every traced frame reported its end: one that did not stopped being traced midway."""
        return all(state[2] in _CLOSED for state in self._frames.values())

    def _tampered(self, reason):
        if not self.outcome.truncated:
            self._end(reason)
            self._flush()

    # -- hooks -------------------------------------------------------------------------------------
    def _on_new_frame(self, frame, event, arg):
        try:
            if not self._is_traced_code(frame.f_code) or self.outcome.truncated:
                return None
            state = self._frames.get(frame)
            if state is None:
                state = self._new_state(frame)
            self._emit(frame, state, "call", None)
            return self._local_hook
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
            if event == "return" and not frame.f_trace_lines:  # switched off by the traced code: lines missing
                self._stop(DISABLED)
            if event == "return" and state[2] == "exception":
                state[2] = "unwound"  # the frame ends with its exception node; no return node
                return self._local_hook
            if event == "return" and arg is None and state[14] is not None:
                if unwinds(frame, state[13], self._return_offsets):  # code ran after its exception, then it left
                    self._emit(frame, state, "exception", state[14])
                    state[2] = "unwound"
                    return self._local_hook
            if event == "exception":
                arg = arg[1] if arg[1] is not None else arg[0]
            self._emit(frame, state, event, arg)
            return self._local_hook
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

    def _new_state(self, frame):
        """A traced frame's state, kept for the whole trace (a generator's frame keeps it across resumes):
        [0 frame_id, 1 depth, 2 last event, 3 {name: cache entry}, 4 parent frame_id, 5 the event line's frame
        fields, 6 the function's JSON string, 7 {lineno: source JSON}, and of its previous event: 8 the names
        of its locals (None: the next event writes them in full), 9 their values, 10 for each whether it is
        rendered again or checked at every event, 11 how many are capped, 12 the length of their full list;
        13 its code (`frame.f_code` is an audited read), 14 the last exception raised in it (None: none)]."""
        parent_id, depth = self._parent_of(frame)
        frame_id = len(self._frames)
        code = frame.f_code
        sources = self._sources.get(code)
        if sources is None:
            sources = self._sources[code] = {}
        state = self._frames[frame] = [
            frame_id,
            depth,
            None,
            {},
            parent_id,
            "%d,%s,%d" % (frame_id, "null" if parent_id is None else parent_id, depth),
            quote(code.co_qualname),
            sources,
            None,
            None,
            None,
            0,
            2,
            code,
            None,
        ]
        return state

    def _emit(self, frame, state, event, arg):
        outcome = self.outcome
        budgets = self._budgets
        if self._other_thread_ran:
            self._stop(THREADS)
        if outcome.n_events >= budgets.max_events:
            self._stop("max_events")
        if _monotonic() > self._deadline:
            self._stop("max_seconds")
        state[2] = event
        if event == "exception":
            state[14] = arg
        lineno = frame.f_lineno
        source = state[7].get(lineno)
        if source is None:
            source = state[7][lineno] = quote(self._source_line(state[13], lineno))
        head = '[%d,"%s",%s,%s,%s,%s,' % (
            outcome.n_events,
            event,
            state[5],
            "null" if lineno is None else lineno,
            state[6],
            source,
        )
        pairs = self._locals(frame, state)
        capped = state[11]
        if event == "call" or event == "line":
            tail = ",null]"
        else:
            tail = ",%s]" % quote(self._repr(arg))
            capped += self._repr.capped
        size = len(head) + state[12] + len(tail)  # the line with its locals in full
        if outcome.n_bytes + size > budgets.max_bytes:
            self._stop("max_bytes")
        self._write(head + pairs + tail)
        outcome.n_events += 1
        outcome.n_bytes += size + 1
        outcome.n_capped += capped

    def _locals(self, frame, state):
        """The event's locals as JSON: in full when the frame's names differ from its previous event's, else
        the object of the reprs that changed since. Only the values that are not the same objects as at the
        previous event, and the containers and objects among them, are looked at.

        A cache entry is [value, repr, capped, signature, `"name":"repr"`, `["name","repr"]`, the name's JSON];
        its value is _UNCACHED when the value is rendered again at every event (an object, a container of
        objects). One loop, no helper calls: the tracer's frames count against the traced code's recursion
        limit, so they are kept as few as they were."""
        namespace = frame.f_locals
        mapping = type(namespace)
        if mapping is _FRAME_LOCALS and mapping is not dict:  # 3.13+: a function frame's FrameLocalsProxy (PEP 667)
            names = list(namespace.keys())
            values = list(namespace.values())
        elif issubclass(mapping, dict):
            names = list(dict.keys(namespace))
            values = list(dict.values(namespace))
        else:  # a class body's __prepare__ mapping: its methods are user code
            state[8], state[11], state[12] = None, 0, 2
            return "[]"
        cache = state[3]
        full = names != state[8]
        if full:
            previous, volatile = _NOTHING, _NOTHING
        else:
            previous, volatile = state[9], state[10]
        state[9] = values
        changed = []
        regroup = full  # whether a local started or stopped being looked at at every event
        max_items = self._max_items
        for name, value, old, looked_at in zip(names, values, previous, volatile, strict=False):
            if value is old and not looked_at:
                continue
            entry = cache.get(name)
            if entry is None:
                if type(name) is str:
                    key = self._names.get(name)
                    if key is None:
                        key = self._names[name] = quote(name)
                else:
                    key = compact(name)  # the host rejects the trace, as it always did
                entry = cache[name] = [_UNCACHED, None, False, None, None, "", key]
            kind = type(value)  # compared by identity: no id() (an audited call) and no metaclass __eq__
            immutable = (
                kind is int
                or kind is str
                or kind is _NoneType
                or kind is bool
                or kind is float
                or kind is bytes
                or kind is complex
            )
            if entry[0] is value:
                if immutable:
                    continue
                if entry[3] is not None and unchanged(value, kind, entry[3], max_items):
                    continue
            shown = signature(value, kind, max_items) if kind is list or kind is tuple or kind is dict else None
            text = self._repr(value)
            capped = self._repr.capped
            regroup = regroup or (entry[0] is _UNCACHED or entry[3] is not None) != (shown is not None or not immutable)
            entry[0] = value if immutable or shown is not None else _UNCACHED
            entry[3] = shown
            state[11] += capped - entry[2]
            entry[2] = capped
            if text != entry[1]:
                quoted = quote(text)
                pair = "[%s,%s]" % (entry[6], quoted)
                state[12] += len(pair) - len(entry[5])
                entry[1], entry[4], entry[5] = text, entry[6] + ":" + quoted, pair
                changed.append(entry[4])
        if not full:
            if regroup:
                state[10] = [cache[name][0] is _UNCACHED or cache[name][3] is not None for name in names]
            return "{%s}" % ",".join(changed)
        pairs, looked_at, capped, plain = [], [], 0, True
        for name in names:
            entry = cache[name]
            pairs.append(entry[5])
            looked_at.append(entry[0] is _UNCACHED or entry[3] is not None)
            capped += entry[2]
            plain = plain and type(name) is str
        text = "[%s]" % ",".join(pairs)
        state[8] = names if plain else None  # a name that is not a str: never a delta
        state[10], state[11], state[12] = looked_at, capped, len(text)
        return text

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
