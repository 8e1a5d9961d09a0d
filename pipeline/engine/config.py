"""A job kind's configuration: that kind's own settings, validated up front, hashed.

The config hash goes into every unit's completion record and the manifest: a re-run with the same hash
resumes (finished units are skipped); an output holding another config's dataset is refused unless the
user asks to overwrite it. A kind's config holds only the settings its units use, and its hash covers
them and the kind's name, so changing another kind's defaults never invalidates its finished units
(docs/architecture.md §4). Fields marked `UNHASHED` say where work happens (caches, scratch), not what it
computes; where the job runs (workers, Ray address) is not part of a config at all. Fields marked
`HASHED_WHEN_SET` (added after datasets were made with that kind) are hashed only when they differ from their
default, so the datasets made before them keep their hash and resume.
"""

import hashlib
import json
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from typing import Any, ClassVar

from schemas import TABLES

UNHASHED = {"hashed": False}
HASHED_WHEN_SET = {"hashed": "when_set"}
# Each table's schema VERSION when config hashes began to name them. A kind's hash names the tables it writes
# whose VERSION is past this one, so a schema bump makes every config of a kind that writes the table another
# config (a resumed job re-runs its units; a refresh runs its units again once) and a dataset never holds two
# schemas of one table; datasets made before the rule keep their hash.
SCHEMAS_HASHED_FROM = {
    "traces": 4,
    "failures": 1,
    "trajectories": 2,
    "duplicates": 1,
    "contaminated": 1,
    "go_runs": 4,
    "go_next_event": 4,
    "go_trajectories": 1,
    "go_traces": 1,
    "go_programs": 1,
    "packed": 1,
    "repo_runs": 2,
}


def _hashed(f: Field, value: Any) -> bool:
    """Whether a field's value is part of the hash (see UNHASHED and HASHED_WHEN_SET)."""
    hashed = f.metadata.get("hashed", True)
    if hashed == "when_set":
        default = f.default if f.default_factory is MISSING else f.default_factory()
        return value != default
    return bool(hashed)


def settings_dict(settings: Any) -> Any:
    """The hashed content of a settings value: dataclasses as dicts of their hashed fields (recursively),
    tuples as lists, everything else as it is."""
    if is_dataclass(settings) and not isinstance(settings, type):
        return {
            f.name: settings_dict(getattr(settings, f.name))
            for f in fields(settings)
            if _hashed(f, getattr(settings, f.name))
        }
    if isinstance(settings, (tuple, list)):
        return [settings_dict(value) for value in settings]
    return settings


@dataclass(frozen=True)
class KindConfig:
    """The base of every kind's config: the Parquet writer's zstd level, which every kind uses."""

    kind: ClassVar[str] = ""
    tables: ClassVar[tuple[str, ...]] = ()  # the tables the kind writes
    zstd_level: int = 3

    def __post_init__(self):
        if type(self.zstd_level) is not int or not 1 <= self.zstd_level <= 22:
            raise ValueError(f"zstd_level must be an int in 1..22, got {self.zstd_level!r}")

    @property
    def seed(self) -> int | None:
        """The seed of the job's random choices, recorded in the manifest; None for kinds that draw none."""
        return None

    def as_dict(self) -> dict:
        """The hashed settings, as the manifest records them."""
        return settings_dict(self)

    def hash(self) -> str:
        content = {"kind": self.kind, **self.as_dict()}
        bumped = {
            table: TABLES[table].VERSION for table in self.tables if TABLES[table].VERSION > SCHEMAS_HASHED_FROM[table]
        }
        if bumped:
            content["schemas"] = bumped
        payload = json.dumps(content, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
