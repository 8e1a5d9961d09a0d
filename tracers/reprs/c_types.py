"""The C types of the standard library a traced value often is (deque, defaultdict, OrderedDict, SimpleNamespace,
datetime, bound methods, partial, slice, array, dict views, modules), in their CPython repr format.

Each is walked here through its type's C-level accessors, never its own (or a subclass's) `__repr__`: a
function of (renderer, obj, kind, depth, seen), where `renderer` is the `tracers.reprs.saferepr.SafeRepr`
whose tables dispatch to it. Standard library only: it runs inside the sandbox.
"""

import array
import collections
import datetime
import functools
import sys
import types
from itertools import islice

from tracers.reprs import objstate
from tracers.reprs.objects import fields_repr

_SAFE_HASH = frozenset(map(id, (str, int, float, bytes, bool, type(None))))  # ids: hashing a type can run its metaclass
_module_dict = types.ModuleType.__dict__["__dict__"].__get__
_method_func = types.MethodType.__dict__["__func__"].__get__
_method_self = types.MethodType.__dict__["__self__"].__get__
_function_qualname = types.FunctionType.__dict__["__qualname__"].__get__
_deque_maxlen = collections.deque.__dict__["maxlen"].__get__
_default_factory = collections.defaultdict.__dict__["default_factory"].__get__
_namespace_dict = types.SimpleNamespace.__dict__["__dict__"].__get__
_partial_parts = tuple(functools.partial.__dict__[name].__get__ for name in ("func", "args", "keywords"))
_slice_parts = tuple(slice.__dict__[name].__get__ for name in ("start", "stop", "step"))
_array_typecode = array.array.__dict__["typecode"].__get__
_tzinfo = {id(kind): kind.__dict__["tzinfo"].__get__ for kind in (datetime.datetime, datetime.time)}
_ModuleSpec = type(sys.__spec__)


def deque_repr(renderer, obj, kind, depth, seen):
    if id(obj) in seen:
        return "[...]"
    if depth >= renderer.limits.max_depth:
        return renderer._deep(objstate.name(kind) + "(\u2026)")
    seen.add(id(obj))
    try:
        size = collections.deque.__len__(obj)
        body = "[" + renderer._items(collections.deque.__iter__(obj), size, depth, seen)[1:-1] + "]"
    finally:
        seen.discard(id(obj))
    maxlen = _deque_maxlen(obj)
    tail = "" if maxlen is None else ", maxlen=%d" % maxlen
    return "%s(%s%s)" % (objstate.name(kind), body, tail)


def defaultdict_repr(renderer, obj, kind, depth, seen):
    factory = renderer._repr(_default_factory(obj), depth + 1, seen)
    return "%s(%s, %s)" % (objstate.name(kind), factory, renderer._dict(obj, dict, depth, seen))


def ordered_dict_repr(renderer, obj, kind, depth, seen):
    name = objstate.name(kind)
    size = dict.__len__(obj)
    if not size:
        return name + "()"
    if id(obj) in seen:
        return name + "(...)"
    if depth >= renderer.limits.max_depth:
        return renderer._deep(name + "(\u2026)")
    # The linked order is read only when every key hashes in C: reading it hashes the keys.
    safe = all(id(type(key)) in _SAFE_HASH for key in dict.keys(obj))
    items = collections.OrderedDict.items(obj) if safe else dict.items(obj)
    seen.add(id(obj))
    try:
        pairs = (
            "(" + renderer._repr(key, depth + 2, seen) + ", " + renderer._repr(value, depth + 2, seen) + ")"
            for key, value in items
        )
        return "%s([%s])" % (name, renderer._join(pairs, size))
    finally:
        seen.discard(id(obj))


def namespace_repr(renderer, obj, kind, depth, seen):
    name = "namespace" if kind is types.SimpleNamespace else objstate.name(kind)
    state = _namespace_dict(obj)
    return fields_repr(renderer, name, dict.items(state), dict.__len__(state), obj, depth, seen)


def datetime_repr(renderer, obj, kind, depth, seen):
    base = datetime.datetime if issubclass(kind, datetime.datetime) else datetime.time
    zone = _tzinfo[id(base)](obj)
    if zone is None or type(zone) is datetime.timezone:
        return base.__repr__(obj)
    naive = base.__repr__(base.replace(obj, tzinfo=None))
    return naive[:-1] + ", tzinfo=" + renderer._repr(zone, depth + 1, seen) + ")"


def method_repr(renderer, obj, kind, depth, seen):
    function = _method_func(obj)
    name = _function_qualname(function) if type(function) is types.FunctionType else None
    name = objstate.text(name, "?")
    return "<bound method %s of %s>" % (name, renderer._repr(_method_self(obj), depth + 1, seen))


def partial_repr(renderer, obj, kind, depth, seen):
    function, args, keywords = (get(obj) for get in _partial_parts)
    cap = renderer.limits.max_items
    parts = [renderer._repr(function, depth + 1, seen)]
    parts += [renderer._repr(arg, depth + 1, seen) for arg in islice(args, cap)]
    if type(args) is tuple and tuple.__len__(args) > cap:
        parts.append(renderer._left_out([], tuple.__len__(args) - cap))
    if type(keywords) is dict:
        parts += [
            "%s=%s" % (objstate.text(key), renderer._repr(value, depth + 1, seen))
            for key, value in islice(dict.items(keywords), cap)
        ]
        if dict.__len__(keywords) > cap:
            parts.append(renderer._left_out([], dict.__len__(keywords) - cap))
    return "functools.partial(%s)" % ", ".join(parts)


def slice_repr(renderer, obj, kind, depth, seen):
    return "slice(%s)" % ", ".join(renderer._repr(get(obj), depth + 1, seen) for get in _slice_parts)


def array_repr(renderer, obj, kind, depth, seen):
    code = _array_typecode(obj)
    size = array.array.__len__(obj)
    if not size:
        return "array(%r)" % code
    if code == "u":
        return "array(%r, %s)" % (code, renderer._str(array.array.tounicode(obj), str, depth, seen))
    body = renderer._items(array.array.__iter__(obj), size, depth, seen)[1:-1]
    return "array(%r, [%s])" % (code, body)


def view_repr(renderer, obj, kind, depth, seen):
    name = objstate.name(kind)
    if depth >= renderer.limits.max_depth:
        return renderer._deep(name + "(\u2026)")
    return "%s([%s])" % (name, renderer._items(iter(obj), len(obj), depth, seen)[1:-1])


def module_repr(renderer, obj, kind, depth, seen):
    """ModuleType's repr (importlib's `_module_repr`), from the module's dict and its spec's state."""
    found = objstate.str_keys(_module_dict(obj), ("__name__", "__spec__", "__file__"))
    name = objstate.text(found.get("__name__"))
    spec = found.get("__spec__")
    if type(spec) is _ModuleSpec:
        state = objstate.str_keys(
            renderer._layouts.of(_ModuleSpec).instance_dict(spec) or {}, ("name", "origin", "loader")
        )
        name = objstate.text(state.get("name"), name)
        origin, loader = state.get("origin"), state.get("loader")
        if origin is None:
            return (
                "<module %r>" % name
                if loader is None
                else "<module %r (%s)>"
                % (
                    name,
                    renderer._repr(loader, depth + 1, seen),
                )
            )
        return (
            "<module %r from %r>" % (name, objstate.text(origin))
            if _has_location(spec, renderer._layouts)
            else "<module %r (%s)>" % (name, objstate.text(origin))
        )
    filename = found.get("__file__")
    return "<module %r>" % name if filename is None else "<module %r from %r>" % (name, objstate.text(filename))


def _has_location(spec, layouts):
    state = objstate.str_keys(layouts.of(_ModuleSpec).instance_dict(spec) or {}, ("_set_fileattr",))
    return state.get("_set_fileattr") is True
