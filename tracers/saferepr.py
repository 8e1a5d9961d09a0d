"""Bounded, deterministic, never-raising repr of untrusted values.

`reprlib` is unsafe on traced values: it calls user `__iter__`/`__lt__`, builds whole reprs of huge
objects before cutting them and raises on ints past 4300 digits. This module dispatches on the exact
type, bounds sizes before formatting, walks builtin containers itself and calls user `__repr__` only
under a wall-clock alarm, catching everything. Standard library only: it runs inside the sandbox.
"""

import re
import signal
import threading
from itertools import islice

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_SCALARS = (type(None), bool, float, complex, type(Ellipsis), range)
# C-level reprs that never call back into user code: safe to call directly, addresses normalised.
_NATIVE = (type(len), type(lambda: 0), type(re), type, type(str.join), type(object.__init__))
_REPR_PLAIN = object.__repr__


class Limits:
    """Caps for one repr: characters per value, items per container, nesting depth, user-repr time."""

    __slots__ = ("max_chars", "max_items", "max_depth", "user_repr_s")

    def __init__(self, max_chars=200, max_items=20, max_depth=4, user_repr_s=0.05):
        if max_chars < 8 or max_items < 1 or max_depth < 1 or user_repr_s <= 0:
            raise ValueError("repr limits must be positive (max_chars >= 8)")
        self.max_chars = max_chars
        self.max_items = max_items
        self.max_depth = max_depth
        self.user_repr_s = user_repr_s


class _ReprTimeout(BaseException):
    """Raised by the alarm inside a user `__repr__` that runs too long."""


def _on_alarm(signum, frame):
    raise _ReprTimeout()


def _cut(text, limit):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _placeholder(obj, why):
    return "<%s %s>" % (_type_name(obj), why)


def _type_name(obj):
    try:
        return type(obj).__qualname__
    except BaseException:
        return "object"


def _int_repr(value, limit):
    # An int past ~4300 digits raises in repr(); estimate its size from the bit length instead.
    digits = int(value.bit_length() * 0.30103) + 1
    if digits > limit:
        return "<int with ~%d digits>" % digits
    return repr(value)


class SafeRepr:
    """Callable repr with fixed limits; `repr(obj)` never raises and never exceeds `max_chars`."""

    def __init__(self, limits=None):
        self.limits = limits or Limits()
        self._can_alarm = True

    def __call__(self, obj):
        try:
            return _cut(self._repr(obj, 0, set()), self.limits.max_chars)
        except BaseException:
            return _placeholder(obj, "repr failed")

    def _repr(self, obj, depth, seen):
        kind = type(obj)
        limit = self.limits.max_chars
        if kind is int:
            return _int_repr(obj, limit)
        if kind is str:
            return repr(obj[:limit]) + ("..." if len(obj) > limit else "")
        if kind in (bytes, bytearray):
            body = repr(bytes(obj[:limit])) + ("..." if len(obj) > limit else "")
            return body if kind is bytes else "bytearray(%s)" % body
        if kind in _SCALARS:
            return repr(obj)
        if kind in (list, tuple, set, frozenset, dict):
            return self._container(obj, kind, depth, seen)
        if isinstance(obj, BaseException) and kind.__repr__ is BaseException.__repr__:
            return "%s(%s)" % (kind.__name__, self._items(obj.args, depth, seen)[1:-1])
        if kind.__repr__ is _REPR_PLAIN:
            return "<%s object at 0x...>" % _type_name(obj)
        if kind in _NATIVE:
            return _ADDRESS.sub("0x...", repr(obj))
        return self._user_repr(obj)

    def _container(self, obj, kind, depth, seen):
        if id(obj) in seen:
            return "[...]" if kind is list else "{...}" if kind in (dict, set) else "(...)"
        if depth >= self.limits.max_depth:
            return {list: "[...]", tuple: "(...)", dict: "{...}"}.get(kind, kind.__name__ + "(...)")
        seen.add(id(obj))
        try:
            if kind is dict:
                return self._dict(obj, depth, seen)
            if kind in (set, frozenset):
                return self._set(obj, kind, depth, seen)
            text = self._items(obj, depth, seen)
            if kind is tuple and len(obj) == 1:
                text = text[:-1] + ",)"
            return text if kind is tuple else "[" + text[1:-1] + "]"
        finally:
            seen.discard(id(obj))

    def _items(self, items, depth, seen):
        cap = self.limits.max_items
        parts = [self._repr(item, depth + 1, seen) for item in islice(items, cap)]
        if len(items) > cap:
            parts.append("...")
        return "(" + ", ".join(parts) + ")"

    def _dict(self, obj, depth, seen):
        cap = self.limits.max_items
        parts = [
            self._repr(key, depth + 1, seen) + ": " + self._repr(value, depth + 1, seen)
            for key, value in islice(dict.items(obj), cap)
        ]
        if len(obj) > cap:
            parts.append("...")
        return "{" + ", ".join(parts) + "}"

    def _set(self, obj, kind, depth, seen):
        if not obj:
            return kind.__name__ + "()"
        cap = self.limits.max_items
        # Small sets are shown sorted (numbers by value, everything else by repr); large ones in
        # iteration order, which is stable because the sandbox fixes PYTHONHASHSEED.
        if len(obj) <= 4 * cap:
            reprs = [(item, self._repr(item, depth + 1, seen)) for item in obj]
            if all(type(item) in (int, float) for item, _ in reprs):
                reprs.sort(key=lambda pair: pair[0])
            else:
                reprs.sort(key=lambda pair: pair[1])
            parts = [text for _, text in reprs[:cap]]
        else:
            parts = [self._repr(item, depth + 1, seen) for item in islice(obj, cap)]
        if len(obj) > cap:
            parts.append("...")
        body = "{" + ", ".join(parts) + "}"
        return body if kind is set else "frozenset(" + body + ")"

    def _user_repr(self, obj):
        """Call a user-defined `__repr__` under a wall-clock alarm; any failure becomes a placeholder."""
        alarm = self._can_alarm and threading.current_thread() is threading.main_thread()
        previous = None
        try:
            if alarm:
                previous = signal.signal(signal.SIGALRM, _on_alarm)
                signal.setitimer(signal.ITIMER_REAL, self.limits.user_repr_s)
            text = repr(obj)
            if type(text) is not str:
                return _placeholder(obj, "repr returned non-str")
        except _ReprTimeout:
            return _placeholder(obj, "repr timed out")
        except BaseException:
            return _placeholder(obj, "repr raised")
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous or signal.SIG_DFL)
        return _ADDRESS.sub("0x...", _cut(text, self.limits.max_chars))
