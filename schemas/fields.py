"""Helpers to declare documented Arrow fields."""

import pyarrow as pa


def field(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    """An Arrow field carrying its documentation as `doc` metadata."""
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


def doc_of(f: pa.Field) -> str:
    return (f.metadata or {}).get(b"doc", b"").decode()
