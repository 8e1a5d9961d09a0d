"""The `sys.monitoring` backend (PEP 669, CPython 3.12+): the same capture as `tracers.trace.tracer`, cheaper delivery.

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

Guarantees kept. The tool ids, their guards and the opaque hooks are `tracers.trace.monitoring_tools`'; a tool
whose name, events or callbacks are no longer the tracer's at the end of the call ends the trace
`tracer_disabled`; no free tool id ends it `tracer_error:NoMonitoringTool`. Standard library only.
"""

import sys
import threading

from tracers.trace.monitoring_tools import (
    _E,
    DISABLE,
    GLOBAL_EVENTS,
    LOCAL_EVENTS,
    LineTable,
    claim,
    install_guards,
)
from tracers.trace.tamper import opaque
from tracers.trace.tracer import DISABLED, BudgetExceeded, Tracer

NO_TOOL = "tracer_error:NoMonitoringTool"
_NOT_THROWN = object()


class MonitoringTracer(Tracer):
    """`tracers.trace.tracer.Tracer` with its events delivered by `sys.monitoring` (one tool id per run)."""

    backend = "monitoring"

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
        tool.on_fork(opaque(self._detach))
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
            tool.register(event, opaque(callback))
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
