"""Pure-Python standard library classes common in test code (Counter, pathlib paths, Fraction, UUID), shown
in their own repr's format from their slots and items by `tracers.reprs.objects`: their `__repr__` is never called
(a subclass or a monkeypatch could make it run user code). Each renderer takes the SafeRepr, the class's
layout (`tracers.reprs.objstate`'s slot reader), the value, depth and the ids being rendered, and returns None
when the value's state is not what the class itself would hold (the value is then rendered from its state
like any other object). Standard library only: it runs inside the sandbox.
"""


def _path(renderer, layout, obj, depth, seen):
    state = layout.slot_values(obj, ("_drv", "_root", "_parts"))
    drv, root, parts = state.get("_drv"), state.get("_root"), state.get("_parts")
    if type(drv) is not str or type(root) is not str or type(parts) is not list:
        return None
    if not all(type(part) is str for part in parts):
        return None
    text = drv + root + "/".join(parts[1:] if drv or root else parts)
    return "%s(%r)" % (layout.key[1], (text or ".").replace("\\", "/"))


def _fraction(renderer, layout, obj, depth, seen):
    state = layout.slot_values(obj, ("_numerator", "_denominator"))
    numerator, denominator = state.get("_numerator"), state.get("_denominator")
    if type(numerator) is not int or type(denominator) is not int:
        return None
    return "Fraction(%d, %d)" % (numerator, denominator)


def _uuid(renderer, layout, obj, depth, seen):
    value = layout.slot_values(obj, ("int",)).get("int")
    if type(value) is not int or not 0 <= value < 1 << 128:
        return None
    text = "%032x" % value
    return "UUID('%s-%s-%s-%s-%s')" % (text[:8], text[8:12], text[12:16], text[16:20], text[20:])


def _counter(renderer, layout, obj, depth, seen):
    """Counter's repr: most common first (a stable sort by count), when every count is a plain number."""
    items = list(dict.items(obj))
    if not all(id(type(count)) in _NUMBERS for _, count in items):
        return None
    if not items:
        return layout.key[1] + "()"
    if id(obj) in seen:
        return layout.key[1] + "(...)"
    if depth >= renderer.limits.max_depth:
        return renderer._deep(layout.key[1] + "(\u2026)")
    items.sort(key=lambda item: item[1], reverse=True)
    seen.add(id(obj))
    try:
        return "%s({%s})" % (layout.key[1], renderer._pairs(items, len(items), depth, seen))
    finally:
        seen.discard(id(obj))


_NUMBERS = frozenset(map(id, (int, float)))
STDLIB_RENDERERS = {
    ("collections", "Counter"): _counter,
    ("pathlib", "PurePosixPath"): _path,
    ("pathlib", "PosixPath"): _path,
    ("pathlib", "PureWindowsPath"): _path,
    ("pathlib", "WindowsPath"): _path,
    ("fractions", "Fraction"): _fraction,
    ("uuid", "UUID"): _uuid,
}
