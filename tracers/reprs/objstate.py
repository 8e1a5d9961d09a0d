"""Read a value's type and state through CPython's own C-level descriptors, never through its Python code.

`obj.__dict__`, `cls.__mro__`, `cls.__name__`, `isinstance(obj, C)` and `kind in (list, dict)` all run
user code when the value is hostile: a `__getattribute__`, a `__dict__` or `__class__` property, a
metaclass `__getattr__`/`__eq__`/`__hash__`. Here every read goes through a descriptor object taken from
`type.__dict__` (or a builtin's `__dict__`) once, at import, and called directly: `type(obj)` and
those getters are C code a class cannot override. Type identity is compared by `id()`, never by `==`
or hashing. Standard library only.
"""

import types

HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: the type was created at run time (a class statement, or a C extension's
# PyType_FromSpec); builtin types are static

_mro = type.__dict__["__mro__"].__get__
_flags = type.__dict__["__flags__"].__get__
_name = type.__dict__["__name__"].__get__
_qualname = type.__dict__["__qualname__"].__get__
_module = type.__dict__["__module__"].__get__
_class_dict = type.__dict__["__dict__"].__get__  # a read-only proxy of the class's own (exact) dict
_GETSET = types.GetSetDescriptorType
_MEMBER = types.MemberDescriptorType
_getset_get = _GETSET.__get__
_member_get = _MEMBER.__get__
_member_name = _MEMBER.__dict__["__name__"].__get__
_member_owner = _MEMBER.__dict__["__objclass__"].__get__
_as_str = str.__str__  # an exact copy of a str subclass's characters; its own __str__ is not called
_dict_len = dict.__len__
_dict_items = dict.items
_CACHE_LIMIT = 4096


def text(value, default="?"):
    """`value` as an exact str when it is a str (or a str subclass, copied without calling it), else `default`."""
    if type(value) is str:
        return value
    if issubclass(type(value), str):  # issubclass on two types is a C-level MRO check
        return _as_str(value)
    return default


def mro(kind):
    return _mro(kind)


def is_heap(kind):
    return bool(_flags(kind) & HEAPTYPE)


def name(kind):
    return text(_name(kind))


def qualname(kind):
    return text(_qualname(kind))


def module(kind):
    return text(_module(kind), "")


def class_get(kind, key):
    """`key` from the class's own dict (not inherited, no descriptor called), or None."""
    return _class_dict(kind).get(key)


def defines(kind, key):
    """The first class in `kind`'s MRO whose own dict holds `key` (what attribute lookup would find), or None."""
    for base in _mro(kind):
        if key in _class_dict(base):
            return base
    return None


def first_builtin(kind):
    """The first static (builtin) type in the MRO: the layout the instance was built on (object for a plain
    class, dict for a dict subclass)."""
    for base in _mro(kind):
        if not _flags(base) & HEAPTYPE:
            return base
    return object


def same_type(value, kind):
    return id(type(value)) == id(kind)


class Layout:
    """Where an instance of one type keeps its state: its `__dict__` getter and its slots, in MRO order from
    the base class down (a subclass redeclaring a slot shows it once)."""

    __slots__ = ("kind", "key", "mro", "dict_getter", "slots", "repr_overridden", "named_fields")

    def __init__(self, kind):
        self.kind = kind
        self.key = (module(kind), qualname(kind))
        self.mro = _mro(kind)
        self.dict_getter = None
        self.repr_overridden = False
        self.named_fields = None
        found_repr = found_fields = False
        for base in self.mro:  # what attribute lookup would find, by scanning (no hashing of hostile keys)
            for key, value in _class_dict(base).items():
                if type(key) is not str:
                    continue
                if key == "__repr__" and not found_repr:
                    found_repr = True
                    self.repr_overridden = bool(_flags(base) & HEAPTYPE)
                elif key == "_fields" and not found_fields:
                    found_fields = True
                    if type(value) is tuple and all(type(item) is str for item in value):
                        self.named_fields = value
        seen, slots = set(), []
        for base in reversed(self.mro):
            if not _flags(base) & HEAPTYPE:
                continue
            for key, value in _class_dict(base).items():
                if type(value) is _GETSET and key == "__dict__":
                    self.dict_getter = value
                elif type(value) is _MEMBER and id(_member_owner(value)) == id(base) and id(value) not in seen:
                    slot = text(_member_name(value))
                    if not (slot.startswith("__") and slot.endswith("__")):
                        seen.add(id(value))
                        slots.append((slot, value))
        if self.dict_getter is None:  # a dict added by a builtin base (a dict found on a heap C type is above)
            for base in self.mro:
                found = _class_dict(base).get("__dict__")
                if type(found) is _GETSET:
                    self.dict_getter = found
                    break
        self.slots = slots

    def fields(self, obj, limit):
        """Up to `limit` (name, value) pairs: set slots, then the instance dict's items in insertion order; and
        whether there were more. Unset slots are skipped; a non-str dict key is given as the key itself."""
        out = []
        for slot, descriptor in self.slots:
            if len(out) > limit:
                break
            try:
                out.append((slot, _member_get(descriptor, obj, self.kind)))
            except AttributeError:
                continue
        state = self.instance_dict(obj)
        if state is not None and len(out) <= limit:
            for key, value in _dict_items(state):
                if len(out) > limit:
                    break
                out.append((key, value))
        return out[:limit], len(out) > limit

    def instance_dict(self, obj):
        if self.dict_getter is None:
            return None
        try:
            state = _getset_get(self.dict_getter, obj, self.kind)
        except BaseException:
            return None
        return state if issubclass(type(state), dict) and _dict_len(state) else None

    def slot_values(self, obj, names):
        """{name: value} of the set slots among `names`."""
        out = {}
        for slot, descriptor in self.slots:
            if slot in names:
                try:
                    out[slot] = _member_get(descriptor, obj, self.kind)
                except AttributeError:
                    pass
        return out

    def tuple_fields(self, obj):
        """A namedtuple's field names when they match the tuple's length, else None."""
        fields = self.named_fields
        return fields if fields is not None and len(fields) == tuple.__len__(obj) else None

    @property
    def has_state(self):
        return self.dict_getter is not None or bool(self.slots)


class Layouts:
    """Per-type `Layout` cache keyed by `id(type)` (a metaclass cannot hook it); the type is kept alive with
    its entry and checked by identity, and a changed `__mro__` (`__bases__` assigned) rebuilds it."""

    def __init__(self):
        self._entries = {}

    def of(self, kind):
        entry = self._entries.get(id(kind))
        if entry is not None and entry.kind is kind and entry.mro is _mro(kind):
            return entry
        if len(self._entries) >= _CACHE_LIMIT:
            self._entries.clear()
        entry = self._entries[id(kind)] = Layout(kind)
        return entry


def str_keys(mapping, wanted):
    """The values of the exact-str keys `wanted` of a dict, found by scanning (a lookup would hash and compare
    the mapping's own keys, which may be hostile)."""
    found = {}
    for key, value in _dict_items(mapping):
        if type(key) is str and key in wanted:
            found[key] = value
    return found
