"""Values of every other class, rendered from their state: `Qualname(field=<repr>, ...)` (schemas/reprs.md).

The fields are the instance's slots and `__dict__`, read through the type's own descriptors
(`tracers.reprs.objstate`), so no `__repr__`, `__getattr__` or property of the class runs; an enum member is
`<Name.MEMBER: value>`, a class extending a builtin layout shows that layout's repr (and its fields when the
class overrides `__repr__`), pure-Python standard library classes their own format
(`tracers.reprs.stdlib_reprs`). Functions of (renderer, ...), the renderer being a
`tracers.reprs.saferepr.SafeRepr`. Standard library only: it runs inside the sandbox.
"""

import enum

from tracers.reprs import objstate
from tracers.reprs.stdlib_reprs import STDLIB_RENDERERS


def type_name(obj):
    try:
        return objstate.qualname(type(obj))
    except BaseException:
        return "object"


def plain_object(obj):
    return "<%s object at 0x...>" % type_name(obj)


def object_repr(renderer, obj, kind, depth, seen):
    if issubclass(type(kind), enum.EnumMeta):
        return _enum(renderer, obj, kind, depth, seen)
    layout = renderer._layouts.of(kind)
    special = STDLIB_RENDERERS.get(layout.key) if objstate.is_heap(kind) else None
    text = special(renderer, layout, obj, depth, seen) if special is not None else None
    if text is not None:
        return text
    base = objstate.first_builtin(kind)
    fmt = renderer._bases.get(id(base)) if base is not object else None
    if fmt is not None and objstate.is_heap(kind):
        if base is tuple and layout.tuple_fields(obj) is not None:
            pairs = zip(layout.tuple_fields(obj), tuple.__iter__(obj), strict=False)
            return fields_repr(renderer, objstate.name(kind), pairs, tuple.__len__(obj), obj, depth, seen)
        inner = fmt(renderer, obj, kind, depth, seen)
        if not layout.repr_overridden:
            return inner
        return _object_fields(renderer, obj, kind, layout, depth, seen, inner)
    if fmt is not None:
        return fmt(renderer, obj, kind, depth, seen)
    if not objstate.is_heap(kind) or not layout.has_state:
        return plain_object(obj)
    return _object_fields(renderer, obj, kind, layout, depth, seen, None)


def _object_fields(renderer, obj, kind, layout, depth, seen, inner):
    name = objstate.qualname(kind)
    if id(obj) in seen:
        return name + "(...)"
    if depth >= renderer.limits.max_depth:
        return renderer._deep(name + "(\u2026)")
    fields, more = layout.fields(obj, renderer.limits.max_items)
    size = len(fields) + (1 if more else 0) + (inner is not None)
    if inner is not None:
        fields = [(None, inner)] + fields
    return fields_repr(renderer, name, fields, size, obj, depth, seen, known=not more)


def fields_repr(renderer, name, pairs, size, obj, depth, seen, known=True):
    """`Name(a=<repr>, b=<repr>)`; a pair whose name is None is shown bare (already rendered). With
    `known` false, `size` only says that there are more fields than shown (their number is unknown)."""
    if id(obj) in seen:
        return name + "(...)"
    if depth >= renderer.limits.max_depth:
        return renderer._deep(name + "(\u2026)")
    seen.add(id(obj))
    try:
        parts = (
            value
            if key is None
            else "%s=%s" % (_field_name(key, renderer, depth, seen), renderer._repr(value, depth + 1, seen))
            for key, value in pairs
        )
        return name + "(" + renderer._join(parts, size, known) + ")"
    finally:
        seen.discard(id(obj))


def _enum(renderer, obj, kind, depth, seen):
    """`<Color.RED: 1>` (Enum's own repr) from the member's `_name_` and `_value_`."""
    layout = renderer._layouts.of(kind)
    state = objstate.str_keys(layout.instance_dict(obj) or {}, ("_name_", "_value_"))
    member = objstate.text(state.get("_name_"), "")
    name = objstate.name(kind) + ("." + member if member else "")
    return "<%s: %s>" % (name, renderer._repr(state.get("_value_"), depth + 1, seen))


def _field_name(key, renderer, depth, seen):
    if type(key) is str:
        return key
    return "[%s]" % renderer._repr(key, depth + 1, seen)
