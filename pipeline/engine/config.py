"""A job kind's configuration: that kind's own settings, validated up front, hashed.

The config hash goes into every unit's completion record and the manifest: a re-run with the same hash
resumes (finished units are skipped); an output holding another config's dataset is refused unless the
user asks to overwrite it. A kind's config holds only the settings its units use, and its hash covers
them and the kind's name, so changing another kind's defaults never invalidates its finished units
(docs/architecture.md §4).

A setting is declared once, as a field made by `setting`: its default, whether it is hashed, and its command-line
option (`Option`: flag, help, choices; pipeline/engine/options.py makes the commands' options from these). Fields
declared `hashed=False` say where work happens (caches, scratch), not what it computes; where the job runs
(workers, Ray address) is not part of a config at all. Fields declared `hashed="when_set"` (added after datasets
were made with that kind) are hashed only when they differ from their default, so the datasets made before them
keep their hash and resume.
"""

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Literal

from schemas import TABLES

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


@dataclass(frozen=True)
class Option:
    """A setting's command-line option. Its default is the field's, shown as the option takes it by `show` where
    the two differ in shape (a tuple of directions is `both`), and `parse` turns what the option was given into the
    field's value (a `--python 3.12` into the interpreter's path); `default_text` says what the default means
    where its value alone does not. The help ends with the default: `(default: ...)`."""

    flag: str
    help: str
    choices: tuple[str, ...] | None = None
    action: Any = None  # "store_true" or argparse.BooleanOptionalAction; None: the option takes a value
    nargs: str | None = None
    metavar: str | None = None
    parse: Callable[[Any], Any] | None = None
    show: Callable[[Any], Any] | None = None
    default_text: str = ""

    @property
    def dest(self) -> str:
        return dest(self.flag)


def dest(flag: str) -> str:
    """Where argparse puts the value of `flag`: `--max-events` -> `max_events`."""
    return flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Setting:
    """What a field declares besides its default: whether it is hashed, its option, and the options of the fields
    of a nested settings class whose own layer does not declare options (the debugger's policy)."""

    hashed: bool | Literal["when_set"] = True
    option: Option | None = None
    options: Mapping[str, Option] = field(default_factory=dict)


PLAIN = Setting()


def setting(
    default: Any = MISSING,
    option: Option | None = None,
    *,
    default_factory: Any = MISSING,
    hashed: bool | Literal["when_set"] = True,
    options: Mapping[str, Option] | None = None,
    **field_args: Any,
) -> Any:
    """A config field that declares its setting (see `Setting`); `field_args` go to `dataclasses.field`."""
    declared = Setting(hashed, option, dict(options or {}))
    return field(default=default, default_factory=default_factory, metadata={"setting": declared}, **field_args)


def setting_of(f: Field) -> Setting:
    """The setting a field declares (a plain field: hashed, no option)."""
    return f.metadata.get("setting", PLAIN)


def default_of(f: Field) -> Any:
    return f.default if f.default_factory is MISSING else f.default_factory()


def _hashed(f: Field, value: Any) -> bool:
    """Whether a field's value is part of the hash (see `Setting.hashed`)."""
    hashed = setting_of(f).hashed
    if hashed == "when_set":
        return value != default_of(f)
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
