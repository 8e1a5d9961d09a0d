"""Helpers to declare documented Arrow fields."""

import pyarrow as pa


def field(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    """An Arrow field carrying its documentation as `doc` metadata."""
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


def doc_of(f: pa.Field) -> str:
    return (f.metadata or {}).get(b"doc", b"").decode()


def named_values(value_type: pa.DataType) -> pa.DataType:
    """`list<struct<name, value>>`: an ordered name → value mapping every reader's type system has (HF
    `datasets` has no Arrow map equivalent). Writers may give (name, value) pairs; readers get
    `{"name", "value"}` dicts back, which `named_pairs` turns into pairs again."""
    entry = pa.struct(
        [field("name", pa.string(), "the entry's name", nullable=False), field("value", value_type, "its value")]
    )
    return pa.list_(pa.field("item", entry, nullable=False))


def named_pairs(entries) -> list[tuple]:
    """(name, value) pairs of a `named_values` column as read back (dicts), as written (pairs), or a dict;
    KeyError/TypeError/ValueError on anything else."""
    if isinstance(entries, dict):
        return list(entries.items())
    pairs = []
    for entry in entries:
        if isinstance(entry, dict):
            pairs.append((entry["name"], entry["value"]))
        else:
            name, value = entry
            pairs.append((name, value))
    return pairs
