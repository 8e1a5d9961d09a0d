"""The tracer's audit guard: while a call is traced, the ways to the tracer's hooks and state are refused.

An audit hook (one per process, installed on first use, inert while nothing is armed) refuses
`sys.settrace`/`sys.setprofile` in the traced thread and `gc.get_objects`/`get_referrers`/`get_referents`
in any thread (the ways to a hook's or a buffer's state), and the `sys.monitoring` mutators in any thread
(tracers.trace.monitoring_tools routes those CPython does not audit through `refuse_event`): the call raises
`TracerTampered` and the trace ends, exit `never`, truncated, reason `tampered:<event>`. What the guard hands
out is `opaque`: C wrappers with no `__self__`, `__closure__` or `__globals__` to walk. Standard library only.
"""

import _functools
import functools
import os
import sys
import threading

TAMPERED = "tampered:"  # + the audit event: the traced code reached for the tracer's hook or state
_HOOK_EVENTS = frozenset(("sys.settrace", "sys.setprofile"))  # refused in the traced thread
_WALK_EVENTS = frozenset(("gc.get_objects", "gc.get_referrers", "gc.get_referents"))  # refused in every thread
# sys.monitoring (3.12+) is process-wide: its mutators are refused in every thread. Only register_callback raises
# an audit event; tracers.trace.monitoring_tools routes the others through `refuse_event` (its guards on
# sys.monitoring).
MONITORING_MUTATORS = (
    "use_tool_id",
    "free_tool_id",
    "clear_tool_id",
    "register_callback",
    "set_events",
    "set_local_events",
    "restart_events",
)
_MONITOR_EVENTS = frozenset("sys.monitoring." + name for name in MONITORING_MUTATORS)


def opaque(function):
    """`function` behind a C callable that exposes neither it nor its state (an uncached lru wrapper): what
    `sys.gettrace()` and `frame.f_trace` return to the traced code."""
    return _functools._lru_cache_wrapper(function, 0, False, functools._CacheInfo)


class TracerTampered(BaseException):
    """Raised by a refused call (`sys.settrace` in the traced thread, a `gc` walk) while code is traced."""


def _make_guard():
    """(arm, disarm, refuse_event): one audit hook per process, installed on first use, inert while nothing
    is armed.

    `arm(on_tamper, thread_id)` returns a token; while armed, a refused event calls `on_tamper(reason)` and
    raises TracerTampered into the caller. `disarm(token)` ends that arming only. `refuse_event(event)` is the
    same check for an event CPython does not audit (the `sys.monitoring` mutators, through the guards
    tracers.trace.monitoring_tools puts on them). All are opaque, so the armed set is out of reach of the traced code
    (and `gc.get_referents`, the way in, is refused)."""
    armed = {}
    installed = []
    get_ident, getpid, add_hook = threading.get_ident, os.getpid, sys.addaudithook
    hook_events, every_thread = _HOOK_EVENTS, _WALK_EVENTS | _MONITOR_EVENTS

    def audit(event, args):
        if not armed or (event not in hook_events and event not in every_thread):
            return
        hit = [
            on_tamper
            for on_tamper, thread_id, pid in list(armed.values())
            if pid == getpid() and (event in every_thread or thread_id == get_ident())
        ]
        if hit:
            for on_tamper in hit:
                on_tamper(TAMPERED + event)
            raise TracerTampered(TAMPERED + event)

    def refuse_event(event):
        audit(event, ())

    def arm(on_tamper, thread_id):
        if not installed:
            add_hook(audit)
            installed.append(True)
        token = object()
        armed[id(token)] = (on_tamper, thread_id, getpid())
        return token

    def disarm(token):
        armed.pop(id(token), None)

    return opaque(arm), opaque(disarm), opaque(refuse_event)


arm_guard, disarm_guard, refuse_event = _make_guard()
