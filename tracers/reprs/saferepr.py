"""Bounded, deterministic, never-raising repr of untrusted values, without running the values' own code.

`repr()` and `reprlib` run the program's code: a `__repr__` that reads a clock, pops a queue or counts
its calls changes what the traced program does next. Builtin values keep their exact CPython repr, but
it is built here by walking them through their types' C-level methods (a dict subclass's overridden
`items` or `__iter__` is never called). Values of other classes are rendered from their state
(`mode="structural"`, the default; schemas/reprs.md): `Qualname(field=<repr>, ...)` from the instance's
slots and `__dict__`, read through the type's own descriptors (`tracers.reprs.objstate`), so no `__repr__`,
`__str__`, `__getattr__`, property, `__len__`, `__iter__`, `__eq__` or `__hash__` runs. `mode="user"`
calls a class's own `__repr__` (under a wall-clock alarm), for corpora where it is known to be pure.
Sizes are bounded before formatting (items, depth, characters), addresses are normalised to `0x...`,
small sets are sorted. Here: the limits, the dispatch, builtin values and user reprs; the standard library's C
types are rendered by `tracers.reprs.c_types`, values of other classes by `tracers.reprs.objects`. Standard
library only: it runs inside the sandbox.
"""

import array
import collections
import datetime
import decimal
import functools
import re
import signal
import threading
import types
from itertools import islice

from tracers.reprs import c_types, objstate
from tracers.reprs.objects import object_repr, plain_object, type_name

MODES = ("structural", "user")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
# C-level reprs that never call back into user code: called directly, addresses normalised.
_NATIVE = (
    type(len),
    type(lambda: 0),
    type(str.join),
    type(object.__init__),
    type([].__len__),
    type(dict.__dict__["fromkeys"]),
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.CodeType,
    types.FrameType,
    types.CellType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    type(NotImplemented),
    property,
    memoryview,
    decimal.Decimal,
    datetime.date,
    datetime.timedelta,
    datetime.timezone,
    type(re.compile("")),
    type(re.match("", "")),
)
_SCALARS = (type(None), bool, type(Ellipsis), range)
_exception_args = BaseException.__dict__["args"].__get__
CUT = "\u2026"  # the mark of every cap (schemas/reprs.md): no CPython repr writes it outside a quoted string


class Limits:
    """Caps for one repr (characters per value, items per container and fields per object, nesting depth,
    user-repr time) and the rendering mode (`structural` | `user`)."""

    __slots__ = ("max_chars", "max_items", "max_depth", "user_repr_s", "mode")

    def __init__(self, max_chars=200, max_items=20, max_depth=4, user_repr_s=0.05, mode="structural"):
        if max_chars < 8 or max_items < 1 or max_depth < 1 or user_repr_s <= 0:
            raise ValueError("repr limits must be positive (max_chars >= 8)")
        if mode not in MODES:
            raise ValueError("repr mode must be one of %s, got %r" % (", ".join(MODES), mode))
        self.max_chars = max_chars
        self.max_items = max_items
        self.max_depth = max_depth
        self.user_repr_s = user_repr_s
        self.mode = mode


class _ReprTimeout(BaseException):
    """Raised by the alarm inside a user `__repr__` that runs too long."""


def _on_alarm(signum, frame):
    raise _ReprTimeout()


def _cut(text, limit):
    return text if len(text) <= limit else text[: limit - 1] + CUT


def _more(left):
    """The mark in place of what a cap left out: `…+N` for N more items (or characters), `…` if unknown."""
    return CUT + "+%d" % left if left > 0 else CUT


def _placeholder(obj, why):
    return "<%s %s>" % (type_name(obj), why)


def _via(base, addresses):
    """The builtin's own C-level repr slot, called on the value directly (a subclass's override is skipped)."""
    slot = base.__repr__
    if addresses:
        return lambda self, obj, kind, depth, seen: _ADDRESS.sub("0x...", slot(obj))
    return lambda self, obj, kind, depth, seen: slot(obj)


class SafeRepr:
    """Callable repr with fixed limits; `repr(obj)` never raises and never exceeds `max_chars`. After each
    call, `capped` says whether a cap cut the value (its text then holds the mark `…`)."""

    def __init__(self, limits=None):
        self.limits = limits or Limits()
        self.capped = False
        self.n_capped = 0  # calls whose value was capped
        self.structural = self.limits.mode == "structural"
        self._can_alarm = True
        self._layouts = objstate.Layouts()
        self._exact, self._bases = _tables(self.structural)

    def __call__(self, obj):
        self.capped = False
        try:
            text = self._repr(obj, 0, set())
            if len(text) > self.limits.max_chars:
                self.capped = True
                text = _cut(text, self.limits.max_chars)
            self.n_capped += self.capped
            return text
        except BaseException:
            return _placeholder(obj, "repr failed")

    def _repr(self, obj, depth, seen):
        kind = type(obj)
        if kind is int:  # the commonest values first, by identity (never ==, which a metaclass can define)
            return self._int_text(obj)
        if kind is str:
            return self._str_text(obj)
        if obj is None or kind is bool or kind is float:
            return repr(obj)
        handler = self._exact.get(id(kind))
        if handler is not None:
            return handler(self, obj, kind, depth, seen)
        if issubclass(kind, BaseException):  # issubclass on two types: a C-level MRO walk, no __class__ lookup
            if self.structural or objstate.defines(kind, "__repr__") is BaseException:
                return self._exception(obj, kind, depth, seen)
            return self._user_repr(obj)
        if issubclass(kind, type):
            return type.__repr__(obj) if self.structural else self._user_repr(obj)
        if not self.structural:
            if objstate.defines(kind, "__repr__") is object:
                return plain_object(obj)
            return self._user_repr(obj)
        return object_repr(self, obj, kind, depth, seen)

    # -- builtin values: CPython's repr, byte for byte ---------------------------------------------
    def _int(self, obj, kind, depth, seen):
        return self._int_text(obj if kind is int else int.__int__(obj))

    def _int_text(self, value):
        # An int past ~4300 digits raises in repr(); estimate its size from the bit length instead.
        digits = int(value.bit_length() * 0.30103) + 1
        if digits > self.limits.max_chars:
            self.capped = True
            return "<int with ~%d digits>" % digits
        return repr(value)

    def _str(self, obj, kind, depth, seen):
        return self._str_text(obj if kind is str else str.__str__(obj))

    def _str_text(self, text):
        limit = self.limits.max_chars
        if len(text) <= limit:
            return repr(text)
        self.capped = True
        return repr(text[:limit]) + _more(len(text) - limit)

    def _bytes(self, obj, kind, depth, seen):
        limit = self.limits.max_chars
        base = bytes if issubclass(kind, bytes) else bytearray
        body = repr(bytes(base.__getitem__(obj, slice(0, limit))))
        if base.__len__(obj) > limit:
            self.capped = True
            body += _more(base.__len__(obj) - limit)
        return body if base is bytes else "bytearray(%s)" % body

    def _deep(self, text):
        """What stands for a container past `max_depth`: its brackets or its name around the mark."""
        self.capped = True
        return text

    def _type(self, obj, kind, depth, seen):
        return type.__repr__(obj)

    def _sequence(self, obj, kind, depth, seen):
        base = kind if kind is list or kind is tuple else list if issubclass(kind, list) else tuple
        key = id(obj)  # once: id() is an audited call
        if key in seen:
            return "[...]" if base is list else "(...)"
        if depth >= self.limits.max_depth:
            return self._deep("[\u2026]" if base is list else "(\u2026)")
        seen.add(key)
        try:
            size = base.__len__(obj)
            text = self._items(base.__iter__(obj), size, depth, seen)
        finally:
            seen.discard(key)
        if base is tuple:
            return text[:-1] + ",)" if size == 1 else text
        return "[" + text[1:-1] + "]"

    def _items(self, items, size, depth, seen):
        """`(a, b, ...)` of the first `max_items` items; stops early once past `max_chars` (the cut text
        is the same: only what lies past the cut is left out)."""
        limits, render, inner = self.limits, self._repr, depth + 1
        out, total, limit = [], 0, limits.max_chars
        for item in islice(items, limits.max_items):
            part = render(item, inner, seen)
            out.append(part)
            total += len(part) + 2
            if total > limit:
                return "(" + self._left_out(out, size) + ")"
        if size > limits.max_items:
            return "(" + self._left_out(out, size) + ")"
        return "(" + ", ".join(out) + ")"

    def _left_out(self, shown, size, known=True):
        """`a, b, …+N`: the parts shown, then the mark for the `size - len(shown)` left out."""
        self.capped = True
        shown.append(_more(size - len(shown) if known else 0))
        return ", ".join(shown)

    def _join(self, parts, size, known=True):
        limits = self.limits
        out, total = [], 0
        for part in islice(parts, limits.max_items):
            out.append(part)
            total += len(part) + 2
            if total > limits.max_chars:
                return self._left_out(out, size, known)
        if size > limits.max_items:
            return self._left_out(out, size, known)
        return ", ".join(out)

    def _dict(self, obj, kind, depth, seen):
        key = id(obj)  # once: id() is an audited call
        if key in seen:
            return "{...}"
        if depth >= self.limits.max_depth:
            return self._deep("{\u2026}")
        seen.add(key)
        try:
            return "{" + self._pairs(dict.items(obj), dict.__len__(obj), depth, seen) + "}"
        finally:
            seen.discard(key)

    def _pairs(self, items, size, depth, seen):
        limits, render, inner = self.limits, self._repr, depth + 1
        out, total, limit = [], 0, limits.max_chars
        for key, value in islice(items, limits.max_items):
            part = render(key, inner, seen) + ": " + render(value, inner, seen)
            out.append(part)
            total += len(part) + 2
            if total > limit:
                return self._left_out(out, size)
        if size > limits.max_items:
            return self._left_out(out, size)
        return ", ".join(out)

    def _set(self, obj, kind, depth, seen):
        base = frozenset if issubclass(kind, frozenset) else set
        size = base.__len__(obj)
        if not size:
            return base.__name__ + "()"
        if id(obj) in seen:
            return "{...}" if base is set else "(...)"
        if depth >= self.limits.max_depth:
            return self._deep(base.__name__ + "(\u2026)")
        seen.add(id(obj))
        try:
            body = "{" + self._set_items(base.__iter__(obj), size, depth, seen) + "}"
        finally:
            seen.discard(id(obj))
        return body if base is set else "frozenset(" + body + ")"

    def _set_items(self, items, size, depth, seen):
        cap = self.limits.max_items
        # Small sets are shown sorted (numbers by value, everything else by repr); large ones in
        # iteration order, which is stable because the sandbox fixes PYTHONHASHSEED.
        if size <= 4 * cap:
            reprs = [(item, self._repr(item, depth + 1, seen)) for item in items]
            if all(type(item) is int or type(item) is float for item, _ in reprs):
                reprs.sort(key=lambda pair: pair[0])
            else:
                reprs.sort(key=lambda pair: pair[1])
            parts = [text for _, text in reprs[:cap]]
        else:
            parts = [self._repr(item, depth + 1, seen) for item in islice(items, cap)]
        if size > cap:
            return self._left_out(parts, size)
        return ", ".join(parts)

    def _exception(self, obj, kind, depth, seen):
        """`Name(args...)`: BaseException's own repr, whatever the class overrides."""
        args = _exception_args(obj)
        if type(args) is not tuple:
            args = ()
        return objstate.name(kind) + "(" + self._items(iter(args), len(args), depth, seen)[1:-1] + ")"

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
        if len(text) > self.limits.max_chars:
            self.capped = True
        return _ADDRESS.sub("0x...", _cut(text, self.limits.max_chars))


_TABLES = {}  # structural (bool) -> ({id(type): handler}, {id(builtin base): handler}), built on first use


def _tables(structural):
    """The handlers of exact types and of the builtin layouts a class may extend, as plain functions of
    (self, obj, kind, depth, seen): built once per mode, so making a SafeRepr (one per trace) costs nothing."""
    if structural in _TABLES:
        return _TABLES[structural]
    exact = {
        int: SafeRepr._int,
        str: SafeRepr._str,
        bytes: SafeRepr._bytes,
        bytearray: SafeRepr._bytes,
        list: SafeRepr._sequence,
        tuple: SafeRepr._sequence,
        set: SafeRepr._set,
        frozenset: SafeRepr._set,
        dict: SafeRepr._dict,
        type: SafeRepr._type,
    }
    exact.update({kind: _via(kind, False) for kind in _SCALARS + (float, complex)})
    exact.update({kind: _via(kind, True) for kind in _NATIVE + (types.ModuleType,)})
    # Builtin layouts a class may extend: walked in CPython's format, whatever the subclass overrides.
    bases = dict(exact)
    bases.update(
        {
            collections.deque: c_types.deque_repr,
            collections.defaultdict: c_types.defaultdict_repr,
            collections.OrderedDict: c_types.ordered_dict_repr,
            types.SimpleNamespace: c_types.namespace_repr,
            datetime.datetime: c_types.datetime_repr,
            datetime.time: c_types.datetime_repr,
        }
    )
    if structural:
        exact.update(bases)
        exact.update(
            {
                types.ModuleType: c_types.module_repr,
                types.MethodType: c_types.method_repr,
                functools.partial: c_types.partial_repr,
                slice: c_types.slice_repr,
                array.array: c_types.array_repr,
                type({}.keys()): c_types.view_repr,
                type({}.values()): c_types.view_repr,
                type({}.items()): c_types.view_repr,
            }
        )
    tables = _TABLES[structural] = (
        {id(kind): fn for kind, fn in exact.items()},
        {id(kind): fn for kind, fn in bases.items()},
    )
    return tables
