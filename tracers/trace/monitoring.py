"""The `sys.monitoring` backend (PEP 669, CPython 3.12+): the same capture as `tracers.trace.tracer`, cheaper delivery.

Which backend: `resolve_backend("auto")` is `monitoring` where `sys.monitoring` exists and `settrace` before
3.12; `settrace` or `monitoring` forces one. The backend is recorded in the trace: `tracer_version(backend)` is
`TRACER_VERSION` for settrace and `TRACER_VERSION + "+monitoring"` for this one (the `traces` column
`tracer_version`; the headers also carry `tracer_backend`). Standard library only.

Same events. The callbacks forward PEP 669 events to the settrace tracer's own hooks, `Tracer._on_new_frame`
and `Tracer._on_event` (so both backends share one capture, `_emit`), mapped as CPython maps them for
`sys.settrace` itself (Python/legacy_tracing.c): PY_START, PY_RESUME and PY_THROW are `call`; LINE is `line`,
and so is a backward JUMP to an instruction of the same line (a loop of one line); PY_RETURN and PY_YIELD are
`return` with the value, PY_UNWIND `return` with None; RAISE and STOP_ITERATION are `exception`. Since 3.12
settrace itself runs on these events, the two backends see the same events of the same frames: a test traces
the same programs with both under one interpreter and compares the events.

Cheaper. Code the trace does not record costs one callback per code object, then nothing: its PY_START
returns `DISABLE`. Line, return and jump events are local events of the traced code objects only (settrace
calls into C for every line of every frame). `tracers.suite.entry_monitoring` applies this to repository suites,
where it also turns off the events of a function past its budget.

Guarantees kept. The hooks handed to `sys.monitoring` are opaque like the settrace ones (no `__self__` to walk
from `register_callback`'s return value); the tool's real functions live in closures reached only through
opaque wrappers and a per-claim `_Tool` handle the tracer keeps. `install_guards()` (run by the runners before
any record or suite code) replaces the mutators of `sys.monitoring` (`use_tool_id`, `free_tool_id`,
`register_callback`, `set_events`, `set_local_events`, `restart_events`, `clear_tool_id`) by guards: while a
call is traced (`tracers.trace.tracer.arm_guard`) every one of them is refused in every thread (TracerTampered, the
trace ends `tampered:sys.monitoring.<name>`), and at any time one aimed at a tool id this module holds is
refused (ValueError, as for a tool in use; `add_refusal_listener` tells the repository guard). Only
`register_callback` raises an audit event in CPython, and pytrace's audit hook refuses it too. Whatever gets
past (a reference to the real functions from before the guards, a C extension) is caught at the end: a tool
whose name, events or callbacks are no longer the tracer's ends the trace `tracer_disabled`. A process forked
while a tool is held stops getting events in the child (an at-fork hook).
"""

import _functools
import bisect
import functools
import operator
import os
import sys
import threading

from tracers.trace.tracer import (
    DISABLED,
    MONITORING_MUTATORS,
    TRACER_VERSION,
    BudgetExceeded,
    Tracer,
    refuse_event,
)

SETTRACE = "settrace"
MONITORING = "monitoring"
BACKENDS = (SETTRACE, MONITORING)
CHOICES = ("auto",) + BACKENDS  # what a job may ask for: auto picks monitoring where the interpreter has it
AVAILABLE = getattr(sys, "monitoring", None) is not None
TOOL_NAME = "tracegen"
TOOL_PREFERENCE = (4, 3, 5, 2, 1, 0)  # the unnamed ids first: debuggers, coverage, profilers keep theirs
NO_TOOL = "tracer_error:NoMonitoringTool"
_NOT_THROWN = object()


def resolve_backend(requested="auto"):
    """The backend to use: `auto` picks monitoring where this interpreter has it; a forced one must exist here."""
    requested = requested or "auto"
    if requested == "auto":
        return MONITORING if AVAILABLE else SETTRACE
    if requested not in BACKENDS:
        raise ValueError("unknown tracer backend %r: choose auto, %s" % (requested, ", ".join(BACKENDS)))
    if requested == MONITORING and not AVAILABLE:
        raise ValueError(
            "tracer backend 'monitoring' needs CPython 3.12 or later (this is %d.%d)" % sys.version_info[:2]
        )
    return requested


def tracer_version(backend):
    """What a trace records as its tracer version: the settrace tracer's, marked when sys.monitoring made it."""
    return TRACER_VERSION if backend == SETTRACE else "%s+%s" % (TRACER_VERSION, backend)


def _opaque(function):
    return _functools._lru_cache_wrapper(function, 0, False, functools._CacheInfo)


if AVAILABLE:
    _E = sys.monitoring.events
    DISABLE = sys.monitoring.DISABLE
    # Local events (per code object): what settrace itself listens to in a traced frame.
    LOCAL_EVENTS = _E.PY_START | _E.PY_RESUME | _E.PY_RETURN | _E.PY_YIELD | _E.LINE | _E.JUMP | _E.STOP_ITERATION
    START_EVENTS = _E.PY_START | _E.PY_RESUME
    RAISE_EVENTS = _E.RAISE | _E.PY_UNWIND | _E.PY_THROW  # global only: CPython cannot scope them to a code object
    GLOBAL_EVENTS = START_EVENTS | RAISE_EVENTS
else:
    _E = None
    DISABLE = None
    LOCAL_EVENTS = START_EVENTS = RAISE_EVENTS = GLOBAL_EVENTS = 0


def _make_access():
    """(install_guards, claim, add_refusal_listener): the only holders of `sys.monitoring`'s real functions."""
    if not AVAILABLE:

        def unavailable(*args):
            raise RuntimeError("sys.monitoring needs CPython 3.12 or later")

        return _opaque(lambda: None), _opaque(unavailable), _opaque(lambda listener: None)
    monitoring = sys.monitoring
    names = MONITORING_MUTATORS + ("get_tool", "get_events", "get_local_events")
    real = {name: getattr(monitoring, name) for name in names if hasattr(monitoring, name)}
    use_tool, free_tool, get_tool = real["use_tool_id"], real["free_tool_id"], real["get_tool"]
    register, set_events, set_local = real["register_callback"], real["set_events"], real["set_local_events"]
    get_events, get_local, restart = real["get_events"], real["get_local_events"], real["restart_events"]
    claimed = {}  # tool id -> [pid, detach]: ids this module holds in this process (or held in the parent)
    used = set()  # ids claimed before in this process: their DISABLEd locations must be re-enabled first
    listeners = []
    installed = []
    getpid, index, refuse = os.getpid, operator.index, refuse_event
    at_fork = os.register_at_fork

    def guard(name):
        function = real[name]
        event = "sys.monitoring." + name

        def guarded(*args):
            refuse(event)  # TracerTampered while a call is traced
            if args and name != "restart_events":
                tool = index(args[0])  # what the C function will read, read once
                args = (tool,) + args[1:]
                if tool in claimed and name != "use_tool_id":  # use_tool_id fails by itself on a held id
                    for listener in list(listeners):
                        listener(name, tool)
                    raise ValueError("tool %d is in use by tracegen's tracer" % tool)
            return function(*args)

        return _opaque(guarded)

    def install_guards():
        if not installed:
            installed.append(True)
            for name in MONITORING_MUTATORS:
                if name in real:
                    setattr(monitoring, name, guard(name))
            at_fork(after_in_child=forked)

    def forked():
        """In a child of a process that holds a tool: that tool records nothing here."""
        pid = getpid()
        for tool, held in list(claimed.items()):
            if held[0] != pid:
                claimed.pop(tool, None)
                try:
                    if held[1] is not None:
                        held[1]()
                    set_events(tool, 0)
                except BaseException:
                    pass

    def claim(name=TOOL_NAME, preference=TOOL_PREFERENCE):
        """A `_Tool` on the first free id of `preference`, or None when every id is taken."""
        install_guards()
        for tool in preference:
            if get_tool(tool) is None:
                try:
                    use_tool(tool, name)
                except ValueError:
                    continue
                break
        else:
            return None
        if tool in used:
            restart()  # a DISABLE of the previous holder of this id still stands where code did not run since
        used.add(tool)
        held = [getpid(), None]
        claimed[tool] = held
        callbacks = {}
        local_codes = {}

        def register_callback(event, callback):
            callbacks[event] = callback
            register(tool, event, callback)

        def set_global(events):
            set_events(tool, events)

        def set_local_events(code, events):
            if events:
                local_codes[code] = events
            else:
                local_codes.pop(code, None)
            set_local(tool, code, events)

        def intact(global_events, codes=None):
            """Whether the id is still this claim's, with these global events, its own callbacks and the local
            events it set (on `codes`, default all). Swapping a callback out and back is how to read it; only
            the tracer calls this, unarmed."""
            if claimed.get(tool) is not held or get_tool(tool) != name or get_events(tool) != global_events:
                return False
            for event, callback in list(callbacks.items()):
                if register(tool, event, callback) is not callback:
                    return False
            codes = list(local_codes) if codes is None else list(codes)
            return all(get_local(tool, code) == local_codes.get(code, 0) for code in codes)

        def on_fork(detach):
            held[1] = detach

        def release():
            """Events off, callbacks and local events cleared, the id freed (only if it is still this claim's)."""
            if claimed.get(tool) is not held:
                return
            claimed.pop(tool, None)
            try:
                set_events(tool, 0)
                for code in list(local_codes):
                    set_local(tool, code, 0)
                for event in list(callbacks):
                    register(tool, event, None)
            finally:
                local_codes.clear()
                callbacks.clear()
                if get_tool(tool) == name:
                    free_tool(tool)

        return _Tool(
            tool,
            _opaque(register_callback),
            _opaque(set_global),
            _opaque(set_local_events),
            _opaque(intact),
            _opaque(on_fork),
            _opaque(release),
        )

    def add_refusal_listener(listener):
        listeners.append(listener)

    return _opaque(install_guards), _opaque(claim), _opaque(add_refusal_listener)


class _Tool:
    """One claimed tool id and the operations on it (opaque: the real functions stay in their closures)."""

    __slots__ = ("id", "register", "set_events", "set_local_events", "intact", "on_fork", "release")

    def __init__(self, tool_id, register, set_events, set_local_events, intact, on_fork, release):
        self.id = tool_id
        self.register = register
        self.set_events = set_events
        self.set_local_events = set_local_events
        self.intact = intact
        self.on_fork = on_fork
        self.release = release


install_guards, claim, add_refusal_listener = _make_access()


class LineTable:
    """The line of a bytecode offset, as `_Py_Instrumentation_GetLine` sees it (None: no line)."""

    def __init__(self):
        self._tables = {}

    def line(self, code, offset):
        table = self._tables.get(code)
        if table is None:
            starts, lines = [], []
            for start, end, line in code.co_lines():
                if start < end:
                    starts.append(start)
                    lines.append((end, line))
            table = self._tables[code] = (starts, lines)
        starts, lines = table
        at = bisect.bisect_right(starts, offset) - 1
        if at < 0:
            return None
        end, line = lines[at]
        return line if offset < end else None

    def same_line_backward(self, code, source, destination):
        """Whether a JUMP is one settrace reports as a line event: backward, within one (real) line."""
        if destination > source:
            return False
        to_line = self.line(code, destination)
        return to_line is not None and to_line == self.line(code, source)


class MonitoringTracer(Tracer):
    """`tracers.trace.tracer.Tracer` with its events delivered by `sys.monitoring` (one tool id per run)."""

    backend = MONITORING

    def __init__(self, *args, **kwargs):
        Tracer.__init__(self, *args, **kwargs)
        self._tool = None
        self._thread = None
        self._local_codes = set()
        self._global_events = GLOBAL_EVENTS
        self._line_table = LineTable()
        self._getframe = sys._getframe
        self._get_ident = threading.get_ident

    # -- backend ---------------------------------------------------------------------------------------
    def _install(self):
        install_guards()
        tool = claim()
        if tool is None:
            self._end(NO_TOOL)
            return
        self._tool = tool
        self._thread = self._get_ident()
        tool.on_fork(_opaque(self._detach))
        for event, callback in (
            (_E.PY_START, self._m_call),
            (_E.PY_RESUME, self._m_call),
            (_E.PY_THROW, self._m_call),
            (_E.LINE, self._m_line),
            (_E.JUMP, self._m_jump),
            (_E.PY_RETURN, self._m_return),
            (_E.PY_YIELD, self._m_return),
            (_E.PY_UNWIND, self._m_unwind),
            (_E.RAISE, self._m_raise),
            (_E.STOP_ITERATION, self._m_raise),
        ):
            tool.register(event, _opaque(callback))
        tool.set_events(self._global_events)

    def _uninstall(self):
        tool = self._tool
        if tool is None:
            return False
        try:
            return bool(tool.intact(self._global_events))
        finally:
            tool.release()

    def _detach(self):
        """No more events (the trace was cut, or this is a forked child): global and local events off."""
        tool = self._tool
        if tool is None or not self._global_events:
            return
        self._global_events = 0
        tool.set_events(0)
        for code in list(self._local_codes):
            tool.set_local_events(code, 0)
        self._local_codes.clear()

    def _end(self, reason):
        Tracer._end(self, reason)
        try:
            self._detach()
        except BaseException:
            pass

    # -- callbacks: PEP 669 events into the settrace tracer's capture -----------------------------------
    # Each callback does what `Tracer._on_new_frame` / `Tracer._on_event` do for the same settrace event, inline:
    # one Python frame between the event and `_emit`, as with settrace, so that a trace cut by the recursion
    # limit is cut at the same call by both backends.
    def _m_call(self, code, offset, thrown=_NOT_THROWN):
        """PY_START, PY_RESUME (two arguments; they can be disabled where they are) and PY_THROW (three;
        global only): `call`."""
        try:
            traced = self._traced_codes.get(code)
            if traced is None:
                traced = self._is_traced_code(code)
            if not traced:
                return DISABLE if thrown is _NOT_THROWN else None
            if self._get_ident() != self._thread:
                self._other_thread_ran = True
                return None
            if self.outcome.truncated:
                return None
            if code not in self._local_codes:
                self._local_codes.add(code)
                self._tool.set_local_events(code, LOCAL_EVENTS)
            frame = self._getframe(1)
            state = self._frames.get(frame)
            if state is None:
                state = self._new_state(frame)
            self._emit(frame, state, "call", None)
        except BudgetExceeded:
            raise
        except BaseException as error:  # RecursionError near the limit, MemoryError, ...
            self._fail(error)
        return None

    def _m_line(self, code, line):
        try:
            if self._get_ident() != self._thread:
                return None
            frame = self._getframe(1)
            state = self._frames.get(frame)
            if state is None or self.outcome.truncated:
                return None
            self._emit(frame, state, "line", None)
        except BudgetExceeded:
            raise
        except BaseException as error:
            self._fail(error)
        return None

    def _m_jump(self, code, source, destination):
        try:
            if not self._line_table.same_line_backward(code, source, destination):
                return DISABLE
            if self._get_ident() != self._thread:
                return None
            frame = self._getframe(1)
            state = self._frames.get(frame)
            if state is None or self.outcome.truncated:
                return None
            self._emit(frame, state, "line", None)
        except BudgetExceeded:
            raise
        except BaseException as error:
            self._fail(error)
        return None

    def _m_return(self, code, offset, value):
        try:
            if self._get_ident() != self._thread:
                return None
            frame = self._getframe(1)
            state = self._frames.get(frame)
            if state is None or self.outcome.truncated:
                return None
            if not frame.f_trace_lines:  # as with settrace: a frame the traced code told to stop reporting
                self._stop(DISABLED)
            if state[2] == "exception":
                state[2] = "unwound"  # the frame ends with its exception node; no return node
                return None
            self._emit(frame, state, "return", value)
        except BudgetExceeded:
            raise
        except BaseException as error:
            self._fail(error)
        return None

    def _m_unwind(self, code, offset, exception):
        """PY_UNWIND: `return` with None, as settrace reports it; a frame that ran code after its exception
        (`tracers.trace.tracer.unwinds`) ends with that exception again."""
        try:
            if code not in self._local_codes or self._get_ident() != self._thread:
                return None
            frame = self._getframe(1)
            state = self._frames.get(frame)
            if state is None or self.outcome.truncated:
                return None
            if not frame.f_trace_lines:
                self._stop(DISABLED)
            if state[2] == "exception":
                state[2] = "unwound"
                return None
            if state[14] is not None:
                self._emit(frame, state, "exception", state[14])
                state[2] = "unwound"
                return None
            self._emit(frame, state, "return", None)
        except BudgetExceeded:
            raise
        except BaseException as error:
            self._fail(error)
        return None

    def _m_raise(self, code, offset, exception):
        try:
            if code not in self._local_codes or self._get_ident() != self._thread:
                return None
            frame = self._getframe(1)
            state = self._frames.get(frame)
            if state is None or self.outcome.truncated:
                return None
            self._emit(frame, state, "exception", exception)
        except BudgetExceeded:
            raise
        except BaseException as error:
            self._fail(error)
        return None


def tracer_class(backend):
    """The Tracer class of a resolved backend."""
    return MonitoringTracer if backend == MONITORING else Tracer
