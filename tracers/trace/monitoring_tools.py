"""The `sys.monitoring` tools of both tracers (CPython 3.12+): the only holders of its real functions.

The hooks handed to `sys.monitoring` are opaque like the settrace ones (no `__self__` to walk
from `register_callback`'s return value); the tool's real functions live in closures reached only through
opaque wrappers and a per-claim `_Tool` handle the tracer keeps. `install_guards()` (run by the runners before
any record or suite code) replaces the mutators of `sys.monitoring` (`use_tool_id`, `free_tool_id`,
`register_callback`, `set_events`, `set_local_events`, `restart_events`, `clear_tool_id`) by guards: while a
call is traced (`tracers.trace.tamper.arm_guard`) every one of them is refused in every thread (TracerTampered,
the trace ends `tampered:sys.monitoring.<name>`), and at any time one aimed at a tool id this module holds is
refused (ValueError, as for a tool in use; `add_refusal_listener` tells the repository guard). Only
`register_callback` raises an audit event in CPython, and the audit guard's hook refuses it too. Whatever gets
past (a reference to the real functions from before the guards, a C extension) is caught at the end: a tool
whose name, events or callbacks are no longer the tracer's ends the trace `tracer_disabled`. A process forked
while a tool is held stops getting events in the child (an at-fork hook).


`LineTable` maps a bytecode offset to its line as CPython's instrumentation does, for the JUMP events both
tracers turn into settrace's one-line-loop `line` events. Standard library only.
"""

import bisect
import operator
import os
import sys

from tracers.trace.tamper import MONITORING_MUTATORS, opaque, refuse_event

AVAILABLE = getattr(sys, "monitoring", None) is not None
TOOL_NAME = "tracegen"
TOOL_PREFERENCE = (4, 3, 5, 2, 1, 0)  # the unnamed ids first: debuggers, coverage, profilers keep theirs

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

        return opaque(lambda: None), opaque(unavailable), opaque(lambda listener: None)
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

        return opaque(guarded)

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
            opaque(register_callback),
            opaque(set_global),
            opaque(set_local_events),
            opaque(intact),
            opaque(on_fork),
            opaque(release),
        )

    def add_refusal_listener(listener):
        listeners.append(listener)

    return opaque(install_guards), opaque(claim), opaque(add_refusal_listener)


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
