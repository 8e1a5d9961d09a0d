"""The entry tracer on `sys.monitoring` (CPython 3.12+): the same stream as `tracers.suite.entry_tracer`, and code the
stream no longer wants costs (nearly) nothing.

With settrace every call of every function in the process goes through the tracer's global hook, and since
3.12 every line of every frame calls into C as well, so a suite runs 2.6-4.6x slower traced than untraced
even where nothing is recorded any more. Here the events come from two `sys.monitoring` tools
(`tracers.trace.monitoring_tools.claim`), and the callbacks forward them to `EntryTracer._on_call` / `_on_event`, mapped
as CPython maps them for settrace (see tracers/trace/monitoring.py), so both backends write the same stream:

- a *discovery* tool has PY_START globally, for the whole run: the first call of each code object classifies
  it (repository function or not) and is then DISABLEd at that code object; never again a callback for it.
- the *recorder* tool has, per code object (local events): PY_START on the repository functions that may still
  open an entry (within their budgets); every settrace event (PY_START, PY_RESUME, PY_RETURN, PY_YIELD,
  LINE, JUMP, STOP_ITERATION) on those whose frames the tracer follows; nothing on the others. Globally,
  during a test, RAISE / PY_UNWIND / PY_THROW (CPython cannot scope them to a code object), and PY_START /
  PY_RESUME only while the stream is recording (an open entry within its budgets): then every repository
  frame that starts is recorded, as with settrace; other code that starts then is DISABLEd at its first
  callback.
- a function that can open no more entries in this test (the test's caps; `max_entries_per_function` over
  the run once the test has its first entry, which that cap never refuses) and whose frames are no longer
  followed has its local events turned off: its calls cost nothing for the rest of the test. They are turned
  on again when the next test starts, for as long as the function can open entries at all.

So, once the budgets are spent, a suite runs with a callback per new code object and per raised exception,
and a test with a callback per repository function it calls until its first entry (and one more per function
it calls afterwards).
Only the thread that runs the tests is traced (a callback in another thread returns at once). One documented
difference: each event passes through one more Python frame than with settrace, so a call cut by the
recursion limit (`recursion_limit`) can be cut one call earlier. The suite's own `sys.settrace` does not stop
this tracer (and is not reported); its calls of `sys.monitoring` aimed at the tracer's tools are refused
(`tracers.trace.monitoring_tools.install_guards`; the plugin reports `tracer_patched`), and a tool found
changed at the end of a test (name, global events, callbacks, the local events of what the test recorded)
makes that test `tracer_disabled`. Standard library only.
"""

import sys
import threading

from tracers.suite.entry_tracer import EntryTracer
from tracers.trace.backends import MONITORING
from tracers.trace.monitoring_tools import (
    _E,
    DISABLE,
    LOCAL_EVENTS,
    RAISE_EVENTS,
    TOOL_NAME,
    LineTable,
    claim,
    install_guards,
)
from tracers.trace.tamper import opaque

_PY_START = _E.PY_START if _E is not None else 0
_NOT_THROWN = object()


class MonitoringEntryTracer(EntryTracer):
    """`EntryTracer` with its events delivered by sys.monitoring; the tools are claimed for the whole run."""

    backend = MONITORING
    uses_settrace = False

    def __init__(self, *args, **kwargs):
        EntryTracer.__init__(self, *args, **kwargs)
        install_guards()
        self._thread = threading.get_ident()
        self._getframe = sys._getframe
        self._get_ident = threading.get_ident
        self._line_table = LineTable()
        self._full = set()  # codes with every event on the recorder: their frames may be followed
        self._starts = set()  # codes with PY_START only: they may open an entry
        self._muted = set()  # codes turned off for this test's caps: on again at the next test
        self._recording_on = False  # the recorder's global PY_START / PY_RESUME are on
        self._recorder_events = 0
        self._recorder = claim(TOOL_NAME)
        self._discovery = claim(TOOL_NAME + "-discovery") if self._recorder is not None else None
        if self._discovery is None:
            if self._recorder is not None:
                self._recorder.release()
            raise RuntimeError("sys.monitoring: no two free tool ids for the entry tracer")
        recorder = self._recorder
        for event, callback in (
            (_E.PY_START, self._r_call),
            (_E.PY_RESUME, self._r_call),
            (_E.PY_THROW, self._r_call),
            (_E.LINE, self._r_line),
            (_E.JUMP, self._r_jump),
            (_E.PY_RETURN, self._r_return),
            (_E.PY_YIELD, self._r_return),
            (_E.PY_UNWIND, self._r_unwind),
            (_E.RAISE, self._r_raise),
            (_E.STOP_ITERATION, self._r_raise),
        ):
            recorder.register(event, opaque(callback))
        self._discovery.register(_E.PY_START, opaque(self._d_start))
        recorder.on_fork(opaque(self._forked))
        self._discovery.set_events(_PY_START)
        self._set_recorder(RAISE_EVENTS)

    # -- test boundaries ----------------------------------------------------------------------------------
    def _set_hook(self, hook):
        """Between tests only the recorder's global starts go off (RAISE / PY_UNWIND / PY_THROW stay on for the
        run: turning global events on and off costs every code object a re-instrumentation check)."""
        if hook is not None:  # a test starts: what its predecessor's caps turned off may open entries again
            for code in self._muted:
                if self._may_open_later(code):
                    self._set_local(code, _PY_START)
            self._muted.clear()
        else:
            for code in list(self._full):  # what the test followed goes back to what a new test needs
                self._set_local(code, _PY_START if self._may_open_later(code) else 0)
        self._set_recorder(RAISE_EVENTS)
        self._recording_on = False

    def intact(self):
        """Whether both tools are still this tracer's, with the events it set (after a halt took the test's
        events off: whether they were then)."""
        if self._detached is not None:
            return self._detached
        try:
            return bool(
                self._discovery.intact(_PY_START, ())
                and self._recorder.intact(self._recorder_events, tuple(self._full))
            )
        except BaseException:
            return False

    def close(self):
        """Give the tools back (the end of the run)."""
        self.tracing = False
        for tool in (self._recorder, self._discovery):
            tool.release()

    def _forked(self):
        self.tracing = False
        self._discovery.set_events(0)
        self._recorder.set_events(0)

    # -- per code object -------------------------------------------------------------------------------------
    def _set_recorder(self, events):
        if events != self._recorder_events:
            self._recorder_events = events
            self._recorder.set_events(events)

    def _set_local(self, code, events):
        self._full.discard(code)
        self._starts.discard(code)
        if events == LOCAL_EVENTS:
            self._full.add(code)
        elif events:
            self._starts.add(code)
        self._recorder.set_local_events(code, events)

    def _may_open_later(self, code):
        """Whether `code` can open an entry in some later test (every test's first entry may be any function's)."""
        info = self._codes.get(code)
        return bool(info and info.can_enter)

    def _classify(self, code):
        try:
            info = self._code_info(code)
        except BaseException:
            info = None
        self._codes[code] = info
        if info is not None and code not in self._full and self._may_open_later(code):
            self._set_local(code, _PY_START)
        return info

    def _closed_for_test(self, code, info):
        """Whether `code` can open no entry before this test ends (its caps, the test's, a halt)."""
        return (
            not info.can_enter
            or self.halted is not None
            or self._test_entries >= self.max_entries_per_test
            or self._test_function_counts.get(code, 0) >= self.max_per_function_test
            or (self._test_entries > 0 and self._function_counts.get(code, 0) >= self.max_per_function)
        )

    def _after_call(self, code, info, followed):
        """After `_on_call`: events for a code whose frame is followed; none for one that can no longer
        matter in this test; the recorder's global starts on exactly while the stream records."""
        if followed:
            if code not in self._full:
                self._set_local(code, LOCAL_EVENTS)
        elif (code in self._full or code in self._starts) and self._closed_for_test(code, info):
            if not self._recording() and not any(frame.f_code is code for frame in self._frames):
                self._set_local(code, 0)
                if self._may_open_later(code):
                    self._muted.add(code)
        self._sync()

    def _sync(self):
        """The recorder's global starts go on when the stream starts recording, and stay on until the test
        ends: each change of a tool's global events makes every code object that runs next re-instrument
        itself, which costs more than the callbacks of a test that records anyway."""
        if not self._recording_on and self.tracing and self._recording():
            self._recording_on = True
            self._set_recorder(RAISE_EVENTS | _E.PY_START | _E.PY_RESUME)

    # -- callbacks ----------------------------------------------------------------------------------------
    def _d_start(self, code, offset):
        """Discovery: the first start of a code object. Classified, then never seen by this tool again."""
        try:
            if code in self._codes or self._recording_on:
                return DISABLE  # known, or the recorder's global PY_START has this event
            info = self._classify(code)
            if info is not None and self.tracing and self._get_ident() == self._thread:
                followed = self._on_call(self._getframe(1), "call", None) is not None
                self._after_call(code, info, followed)
        except self._abort_types:
            raise
        except BaseException as error:
            self._fail(error)
        return DISABLE

    def _r_call(self, code, offset, thrown=_NOT_THROWN):
        """PY_START / PY_RESUME (two arguments, can be disabled) and PY_THROW (three, global): `call`."""
        try:
            if not self.tracing or self._get_ident() != self._thread:
                return None
            info = self._codes.get(code, False)
            if info is False:
                info = self._classify(code)
            if info is None:
                return DISABLE if thrown is _NOT_THROWN else None
            followed = self._on_call(self._getframe(1), "call", None) is not None
            self._after_call(code, info, followed)
        except self._abort_types:
            raise
        except BaseException as error:
            self._fail(error)
        return None

    def _r_line(self, code, line):
        if self.tracing and self._get_ident() == self._thread:
            self._on_event(self._getframe(1), "line", None)
        return None

    def _r_jump(self, code, source, destination):
        try:
            if not self._line_table.same_line_backward(code, source, destination):
                return DISABLE
        except BaseException as error:
            self._fail(error)
            return None
        if self.tracing and self._get_ident() == self._thread:
            self._on_event(self._getframe(1), "line", None)
        return None

    def _r_return(self, code, offset, value):
        if self.tracing and self._get_ident() == self._thread:
            self._on_event(self._getframe(1), "return", value)
            self._sync()
        return None

    def _r_unwind(self, code, offset, exception):
        if code in self._full and self.tracing and self._get_ident() == self._thread:
            self._on_event(self._getframe(1), "return", None)
            self._sync()
        return None

    def _r_raise(self, code, offset, exception):
        if code in self._full and self.tracing and self._get_ident() == self._thread:
            self._on_event(self._getframe(1), "exception", (None, exception))
        return None
