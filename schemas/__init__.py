"""Arrow schemas of every tracegen table, explicit and versioned (documented in schemas/README.md).

Each table module defines `SCHEMA` (a `pyarrow.Schema` whose fields carry a `doc` metadata entry) and
`VERSION` (bumped on any change). Writers always use these schemas; nothing is inferred from rows.
"""

from schemas import (
    contaminated,
    duplicates,
    failures,
    go_next_event,
    go_programs,
    go_runs,
    go_traces,
    go_trajectories,
    packed,
    repo_runs,
    traces,
    trajectories,
)
from schemas.fields import doc_of

TABLES = {
    "traces": traces,
    "failures": failures,
    "trajectories": trajectories,
    "duplicates": duplicates,
    "contaminated": contaminated,
    "go_runs": go_runs,
    "go_next_event": go_next_event,
    "go_trajectories": go_trajectories,
    "go_traces": go_traces,
    "go_programs": go_programs,
    "packed": packed,
    "repo_runs": repo_runs,
}


def schema_of(table: str):
    """The Arrow schema of `table`; a ValueError names the known tables."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}: known tables are {', '.join(TABLES)}")
    return TABLES[table].SCHEMA


__all__ = ["TABLES", "doc_of", "schema_of"]
