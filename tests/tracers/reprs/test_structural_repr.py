"""The structural renderer: builtins byte for byte, the program's objects from their state, and never a call
into the program's code, whatever the object does to hide or trap."""

import collections
import datetime
import enum
import functools
import pathlib
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from tracers.reprs.saferepr import Limits, SafeRepr

BIG = SafeRepr(Limits(max_chars=100_000, max_items=10_000, max_depth=100))
safe = SafeRepr(Limits(max_chars=200, max_items=5, max_depth=3))

SCALARS = st.one_of(
    st.integers(),
    st.floats(allow_nan=True),
    st.complex_numbers(),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.booleans(),
    st.none(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.one_of(st.integers(), st.text(max_size=5)), inner, max_size=5),
    ),
    max_leaves=30,
)


@given(VALUES)
def test_builtin_values_are_cpythons_repr_byte_for_byte(value):
    assert BIG(value) == repr(value)


def test_standard_containers_print_as_cpython_does():
    values = [
        collections.deque([1, "a"], maxlen=4),
        collections.defaultdict(list, {"a": [1]}),
        collections.OrderedDict([("b", 1), ("a", 2)]),
        collections.Counter("abracadabra"),
        datetime.datetime(2024, 5, 6, 7, 8, tzinfo=datetime.UTC),
        functools.partial(max, 1, key=abs),
        slice(1, None, 2),
        {"a": 1}.items(),
        pathlib.PurePosixPath("/tmp/a/b"),
        ValueError("bad", 3),
        KeyError("k"),
        len,
        collections,
        type,
    ]
    for value in values:
        assert BIG(value).replace("0x...", "") == __import__("re").sub(r"0x[0-9a-f]+", "", repr(value)), value


class Calls:
    """Every method the renderer must not call records its name here."""

    log: list[str] = []


def trap(name):
    def method(self, *args, **kwargs):
        Calls.log.append(name)
        raise AssertionError(name)

    return method


TRAPPED = [
    "__repr__",
    "__str__",
    "__format__",
    "__len__",
    "__iter__",
    "__eq__",
    "__lt__",
    "__hash__",
    "__getattr__",
    "__bool__",
    "__fspath__",
    "__index__",
    "__int__",
]
Trapped = type("Trapped", (), {name: trap(name) for name in TRAPPED})
Meta = type("Meta", (type,), {name: trap("meta" + name) for name in ("__repr__", "__eq__", "__hash__", "__getattr__")})


def make(base=object, metaclass=type, **attributes):
    namespace = {name: trap(name) for name in TRAPPED if name != "__hash__" or base is object}
    namespace.update(attributes)
    return metaclass("Hostile", (base,), namespace)


def render(value, renderer=safe):
    Calls.log.clear()
    text = renderer(value)
    assert Calls.log == [], Calls.log
    return text


def test_objects_are_rendered_from_their_fields_without_calling_them():
    obj = Trapped()
    obj.x, obj.items = 1, [1, 2]
    assert render(obj) == "Trapped(x=1, items=[1, 2])"


def test_a_metaclass_that_traps_comparison_hashing_and_lookup_is_never_run():
    cls = make(metaclass=Meta)
    obj = cls()
    obj.value = "v"
    assert render(obj) == "Hostile(value='v')"
    assert render(cls) == "<class 'test_structural_repr.Hostile'>"
    assert render([obj, {1: obj}]) == "[Hostile(value='v'), {1: Hostile(value='v')}]"


def test_class_and_dict_properties_and_getattribute_are_bypassed():
    class Sneaky:
        __class__ = property(trap("__class__"))
        __getattribute__ = trap("__getattribute__")

    obj = Sneaky()
    object.__setattr__(obj, "a", 1)
    assert render(obj) == "test_class_and_dict_properties_and_getattribute_are_bypassed.<locals>.Sneaky(a=1)"

    class HiddenDict:
        __dict__ = property(trap("__dict__"))

    assert render(HiddenDict()).endswith("HiddenDict object at 0x...>")


def test_a_dict_that_is_not_a_dict_and_odd_keys_are_handled():
    class Weird(dict):
        items = keys = values = __iter__ = __len__ = __getitem__ = trap("dict method")

    obj = Trapped()
    obj.__dict__ = Weird(a=1)
    obj.__dict__[7] = "seven"
    assert render(obj) == "Trapped(a=1, [7]='seven')"


def test_slots_are_read_even_when_a_subclass_shadows_them():
    class Base:
        __slots__ = ("a", "b")

    class Shadow(Base):
        __slots__ = ()
        a = property(trap("a property"))

    obj = Shadow()
    Base.a.__set__(obj, 1)
    assert render(obj).endswith("Shadow(a=1)")  # b is unset: left out


def test_builtin_subclasses_are_walked_by_the_builtins_methods():
    assert render(make(base=dict)(a=1)) == "Hostile({'a': 1})"
    assert render(make(base=list)([1, 2])) == "Hostile([1, 2])"
    assert render(make(base=int)(5)) == "Hostile(5)"
    assert render(make(base=str)("ab")) == "Hostile('ab')"
    assert render(make(base=set)({2, 1})) == "Hostile({1, 2})"
    plain = type("Plain", (dict,), {})
    assert render(plain(a=1)) == "{'a': 1}"  # no __repr__ of its own: CPython prints the dict


def test_exceptions_show_type_and_args_never_str():
    error = make(base=ValueError)("m", 2)
    assert render(error) == "Hostile('m', 2)"


def test_dataclasses_namedtuples_and_enums_look_like_their_reprs():
    @dataclass
    class Point:
        x: int
        y: list

    class Color(enum.Enum):
        RED = 1

    pt = collections.namedtuple("Pt", "x y")
    assert render(Point(1, [2])) == repr(Point(1, [2]))
    assert render(pt(1, 2)) == "Pt(x=1, y=2)"
    assert render(Color.RED) == "<Color.RED: 1>"


def test_recursive_and_huge_structures_are_bounded():
    obj = Trapped()
    obj.me = obj
    assert render(obj) == "Trapped(me=Trapped(...))"
    wide = Trapped()
    for i in range(10_000):
        setattr(wide, f"f{i}", i)
    assert render(wide) == "Trapped(f0=0, f1=1, f2=2, f3=3, f4=4, …)"
    deep = [[[[[[Trapped()]]]]]]
    assert render(deep) == "[[[[…]]]]"
    nested = [["x" * 150] * 5] * 5
    text = render(nested)
    assert len(text) == 200 and text == repr(nested)[:199] + "…"


def test_the_user_mode_calls_the_objects_own_repr():
    class Own:
        def __repr__(self):
            return "Own!"

    assert SafeRepr(Limits(mode="user"))(Own()) == "Own!"
    assert safe(Own()).endswith("Own()")
