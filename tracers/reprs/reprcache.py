"""What lets a tracer keep a local's repr from one event to the next instead of rendering it again.

A value of an immutable builtin type keeps its repr while it is the same object. A flat builtin container
(an exact list, tuple or dict) keeps it while it is the same object with the same signature: its length
and the items its repr shows, when those are all immutable scalars (compared by identity). Standard
library only; used by `tracers.trace.tracer` and `tracers.suite.entry_tracer`. Every check runs in C (no Python-level
loop): it costs less than rendering the container again.
"""

from itertools import islice, repeat
from operator import is_

# Type ids, not types: hashing or comparing a type runs its metaclass's __hash__/__eq__.
IMMUTABLE = frozenset(map(id, (int, float, str, bytes, bool, type(None), complex)))
FLAT = frozenset(map(id, (list, tuple, dict)))
_NoneType = type(None)


def _scalar_type(kind):
    return (
        kind is int
        or kind is str
        or kind is _NoneType
        or kind is bool
        or kind is float
        or kind is bytes
        or kind is complex
    )


def _scalars(items):
    """Whether every item is of an immutable builtin type, by identity of the types (neither id(), which is
    an audited call, nor hashing a type, which runs its metaclass): all of one type in C, else one by one."""
    if not items:
        return True
    first = type(items[0])
    if all(map(is_, map(type, items), repeat(first))):
        return _scalar_type(first)
    return all(_scalar_type(type(item)) for item in items)


def signature(value, kind, max_items):
    """What a flat container's repr depends on: its length and the items it shows (a dict's keys and
    values), when those are immutable scalars; None when it cannot be cached. The signature holds the items
    themselves, so none can be freed and its address reused while the cache compares them by identity."""
    if kind is dict:
        keys = list(islice(dict.keys(value), max_items + 1))
        values = list(islice(dict.values(value), max_items + 1))
        if not (_scalars(keys) and _scalars(values)):
            return None
        return len(value), keys, values
    shown = list(islice(value, max_items + 1))
    if not _scalars(shown):
        return None
    return len(value), shown, None


def same(signature, cached):
    """Whether a container's signature now equals the one its cached repr was made with."""
    return (
        cached is not None
        and signature[0] == cached[0]
        and len(signature[1]) == len(cached[1])
        and all(map(is_, signature[1], cached[1]))
        and (signature[2] is None or all(map(is_, signature[2], cached[2])))
    )


def unchanged(value, kind, cached, max_items):
    """Whether the container `value`, of exact type `kind`, still has the `cached` signature (built from
    it): `same(signature(value, ...), cached)` without building the signature."""
    if len(value) != cached[0]:
        return False
    if kind is dict:
        return all(map(is_, islice(dict.keys(value), max_items + 1), cached[1])) and all(
            map(is_, islice(dict.values(value), max_items + 1), cached[2])
        )
    return all(map(is_, islice(value, max_items + 1), cached[1]))
