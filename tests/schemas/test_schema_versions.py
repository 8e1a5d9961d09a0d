"""A table's schema never changes without a version bump: each schema's shape is pinned next to its VERSION.

Changing a schema (a column added, removed, renamed, retyped, or its nullability) fails here until the
table's VERSION in schemas/ is bumped, the change is noted in CHANGELOG.md, and the pin below is updated.
Documentation (the fields' `doc` metadata) is not part of the shape.
"""

import hashlib

import pyarrow as pa

from schemas import TABLES

PINNED = {
    "traces": (4, "468ad2d4796d04f3"),
    "failures": (1, "2cc6bfab84f00fb9"),
    "trajectories": (2, "11d6b88bb4a35066"),
    "duplicates": (1, "e096e65c731894f2"),
    "go_runs": (4, "9da9856912fb39ec"),
    "go_next_event": (4, "a9e4544e26afdc3b"),
    "go_traces": (1, "604a63f4dfe3d31b"),
    "go_trajectories": (1, "838ed33d17b79803"),
    "go_programs": (1, "79e3580c877158ad"),
    "packed": (1, "9e4be7a9df6946d5"),
    "repo_runs": (3, "457c32f20bd1c36b"),
    "contaminated": (2, "f06ba028e2d2ae76"),
}


def shape_digest(schema: pa.Schema) -> str:
    """Names, types (nested types spelled out by Arrow) and nullability, in order; no metadata."""
    text = ";".join(f"{f.name}:{f.type}:{f.nullable}" for f in schema)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_every_table_is_pinned():
    assert set(PINNED) == set(TABLES)


def test_a_schema_change_comes_with_a_version_bump():
    for name, module in TABLES.items():
        version, digest = PINNED[name]
        now = shape_digest(module.SCHEMA)
        if module.VERSION == version:
            assert now == digest, (
                f"schemas/{name}.py changed shape without a VERSION bump: bump VERSION, note the "
                f"change in CHANGELOG.md, and pin ({module.VERSION + 1}, {now!r}) here"
            )
        else:
            assert module.VERSION > version, f"schemas/{name}.py: VERSION went down"
            raise AssertionError(
                f"schemas/{name}.py is now version {module.VERSION}: pin ({module.VERSION}, "
                f"{now!r}) here and note the change in CHANGELOG.md"
            )


def test_the_digest_sees_a_nested_change():
    inner = pa.struct([pa.field("a", pa.int32())])
    changed = pa.struct([pa.field("a", pa.int64())])
    assert shape_digest(pa.schema([pa.field("x", pa.list_(inner))])) != shape_digest(
        pa.schema([pa.field("x", pa.list_(changed))])
    )
