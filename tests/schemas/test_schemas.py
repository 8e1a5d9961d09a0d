"""Every table's schema is explicit, documented column by column, and its README is current."""

from pathlib import Path

import pyarrow as pa

from schemas import TABLES
from schemas.document import render
from schemas.fields import doc_of

README = Path(__file__).resolve().parents[2] / "schemas" / "README.md"


def all_fields(fields):
    for f in fields:
        yield f
        inner = f.type.value_type if pa.types.is_list(f.type) else f.type
        if pa.types.is_struct(inner):
            yield from all_fields([inner.field(i) for i in range(inner.num_fields)])


def test_every_column_is_documented():
    for name, module in TABLES.items():
        assert isinstance(module.VERSION, int) and module.VERSION >= 1, name
        for f in all_fields(module.SCHEMA):
            assert doc_of(f).strip(), f"{name}.{f.name} has no doc"


def test_the_readme_is_generated_from_the_schemas():
    assert README.read_text() == render(), "run: .venv/bin/python -m schemas.document > schemas/README.md"
