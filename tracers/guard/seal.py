"""Sealed copies of the tracer's modules, for a process that will run untrusted code after it has made them.

`sealed(globals())` returns a private copy of a module's namespace: every function and class defined in
a `tracers` module (the module itself and those it uses) is copied, bound to private globals whose
`__builtins__` is a snapshot of the builtins taken when this module was imported, and every module it
names is replaced by a snapshot of that module's attributes. Code that runs later can replace
`builtins.repr`, `json.dumps`, `tracers.reprs.saferepr.SafeRepr._repr` or any module attribute: the sealed
copies see none of it. What stays reachable is what a frame walk or a `gc` walk finds (refused while a
call is traced, `tracers.trace.tracer`). Exception classes are not copied (identity matters to handlers
elsewhere). Standard library only.
"""

import builtins
import sys
import types

_BUILTINS = dict(builtins.__dict__)
_PACKAGE = "tracers"


def sealed(namespace: dict) -> dict:
    """The private copy of `namespace` (a module's globals); the originals are left as they are."""
    return _Sealer().namespace(namespace)


class _Sealer:
    """One sealing: the copies made so far, by id of the original (each original is copied once)."""

    def __init__(self):
        self.copies = {}
        self.modules = {}
        self.originals = []  # kept alive: the ids in `copies` must not be reused

    def namespace(self, namespace):
        name = namespace.get("__name__")
        if name in self.modules:
            return vars(self.modules[name])
        private = {"__builtins__": _BUILTINS}
        self.modules[name] = types.SimpleNamespace()
        self.modules[name].__dict__.update(private)
        private = vars(self.modules[name])
        for key, value in list(namespace.items()):
            if key != "__builtins__":
                private[key] = self.value(value, private)
        return private

    def value(self, value, home):
        copy = self.copies.get(id(value))
        if copy is not None:
            return copy
        kind = type(value)
        if kind is types.FunctionType and _ours(value.__module__):
            return self.function(value, self._globals_of(value.__module__, home))
        if isinstance(value, type) and _ours(value.__module__) and not issubclass(value, BaseException):
            return self.cls(value, self._globals_of(value.__module__, home))
        if kind is types.ModuleType:
            if _ours(value.__name__):
                self.namespace(vars(value))
                return self.modules[value.__name__]
            return types.SimpleNamespace(**vars(value))
        if kind is dict:
            return {self.value(k, home): self.value(v, home) for k, v in value.items()}
        if kind is tuple or kind is list:
            return kind(self.value(item, home) for item in value)
        return value

    def _globals_of(self, module_name, home):
        if module_name == home.get("__name__") or module_name not in sys.modules:
            return home
        return self.namespace(vars(sys.modules[module_name]))

    def _remember(self, original, copy):
        self.copies[id(original)] = copy
        self.originals.append(original)
        return copy

    def function(self, function, private):
        copy = types.FunctionType(function.__code__, private, function.__name__, None, function.__closure__)
        self._remember(function, copy)
        if function.__defaults__ is not None:
            copy.__defaults__ = self.value(function.__defaults__, private)
        copy.__kwdefaults__ = function.__kwdefaults__
        copy.__qualname__, copy.__doc__, copy.__module__ = function.__qualname__, function.__doc__, function.__module__
        copy.__dict__.update(function.__dict__)
        return copy

    def cls(self, cls, private):
        slots = cls.__dict__.get("__slots__", ())
        slots = (slots,) if isinstance(slots, str) else tuple(slots)
        body = {}
        for key, value in cls.__dict__.items():
            if key in ("__dict__", "__weakref__") or key in slots:
                continue
            if type(value) in (staticmethod, classmethod):
                value = type(value)(self.value(value.__func__, private))
            elif type(value) is property:
                value = property(*(self.value(part, private) for part in (value.fget, value.fset, value.fdel)))
            else:
                value = self.value(value, private)
            body[key] = value
        bases = tuple(self.value(base, private) for base in cls.__bases__)
        copy = type(cls)(cls.__name__, bases, body)
        copy.__qualname__ = cls.__qualname__
        return self._remember(cls, copy)


def _ours(module_name):
    return module_name == "__main__" or module_name == _PACKAGE or str(module_name).startswith(_PACKAGE + ".")
