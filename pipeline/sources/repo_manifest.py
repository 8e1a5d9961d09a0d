"""Repository manifest (TOML): which repositories to trace, at which ref, how to install and test them.

```toml
[[repo]]
name = "toolz"                          # unique; letters, digits, . _ -
url = "https://github.com/pytoolz/toolz" # anything `git clone` takes: URL, local path, file://
ref = "1.0.0"                           # branch, tag or commit (resolved to a SHA per run)
install = ["pip install -e ."]          # optional: replaces the default install (see below)
test = ["toolz/tests", "-k", "not slow"] # optional: pytest arguments (default: the whole suite)
include = ["toolz/**"]                   # optional: globs of the repository's own code
exclude = ["toolz/sandbox"]              # optional: globs excluded from it
timeout_s = 900                          # optional budgets, see RepoSpec
max_events = 10000

[[repo]]
name = "six"
sdist = "six==1.16.0"                    # instead of url + ref: that source distribution from the package index
```

A repository is either `url` + `ref` (a git repository) or `sdist = "name==version"`: the package index's
source distribution of exactly that version, which the host downloads through the index's simple API (no
code of it runs), verifies against the index's sha256 and unpacks safely into the cache
(`pipeline.sources.sdist`); its commit is then `sdist-sha256-{hex}`, the archive's hash, and a refresh takes
the pin as immutable. The sdist's tree is installed and tested like a checkout (an sdist without its tests
traces nothing).

Default install (tracers/install/step.py): pytest, the package (editable) and the test requirements its CI would
install (dependency groups, test extra, requirements files, tox, hatch, nox), with fallback steps when they
cannot be resolved and repairs of the modules collection finds missing. Globs are matched against paths
relative to the repository root: `**/` spans directories, `*` stays within one, and a pattern that
matches a directory covers everything under it. conftest.py and test modules never count as the
repository's code. Any manifest error (missing file, bad TOML, unknown key, wrong type, both or neither
of `url`/`ref` and `sdist`) is a ValueError naming the file, the repository and the key, with the line
where it can be found.
"""

import re
import shlex
import tomllib
from dataclasses import asdict, dataclass, field, fields

from pipeline.sources.sdist.index import parse_pin
from tracers.suite.repo_code import DEFAULT_EXCLUDE, DEFAULT_INCLUDE, glob_regex

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
REQUIRED = ("name",)
GIT_KEYS = ("url", "ref")
_NUMBERS = (int, float)


@dataclass(frozen=True)
class RepoSpec:
    """One `[[repo]]` table, validated: `url` + `ref`, or `sdist` (then url and ref are ""). Budgets left unset
    take the job's `TraceSettings`."""

    name: str
    url: str = ""
    ref: str = ""
    sdist: str = ""  # "name==version" of a package-index source distribution
    install: tuple[str, ...] | None = None
    test: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    timeout_s: float = 900.0  # wall clock of the whole traced test run
    install_timeout_s: float = 900.0  # wall clock of the install phase
    test_timeout_s: float = 60.0  # one test (setup + call + teardown), traced
    max_events: int | None = None  # events per entry trace
    max_bytes: int | None = None  # bytes of one entry trace's events
    max_entries_per_test: int = 200
    max_entries_per_function: int = 200  # over the whole run, per function (20 per function per test)
    input_ref: str = field(default="", compare=False)
    piece: str = ""  # "k/n" when the planner split the suite into n units (pipeline/stages/repos/pieces.py)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def pin(self) -> str:
        """What the manifest pins: the git ref, or the sdist's `name==version`."""
        return self.sdist or self.ref

    def __repr__(self) -> str:
        """The dataclass repr, `sdist` and `piece` left out when unset: a git repository's repr, which unit
        fingerprints and refresh keys hash, stays what it was before either existed."""
        shown = (f for f in fields(self) if f.repr and (f.name not in ("sdist", "piece") or getattr(self, f.name)))
        return f"RepoSpec({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"


_TYPES = {
    "name": "str",
    "url": "str",
    "ref": "str",
    "sdist": "str",
    "install": "str or list of str",
    "test": "str or list of str",
    "include": "list of str",
    "exclude": "list of str",
    "timeout_s": "positive number",
    "install_timeout_s": "positive number",
    "test_timeout_s": "positive number",
    "max_events": "positive int",
    "max_bytes": "positive int",
    "max_entries_per_test": "positive int",
    "max_entries_per_function": "positive int",
}
KNOWN_KEYS = tuple(_TYPES)


def read_repo_manifest(path: str) -> list[RepoSpec]:
    """Every `[[repo]]` of the manifest, in file order; any error is a ValueError (see module doc)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ValueError(
            f"cannot read the repository manifest {path!r}: {error.strerror or error}; pass an "
            f"existing TOML file with --manifest"
        ) from error
    text = data.decode("utf-8", "replace")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from error
    for key in document:
        if key != "repo":
            raise ValueError(
                f"{path}: unknown top-level key {key!r}{_line_of(text, key, None)}; a manifest "
                f"holds only [[repo]] tables"
            )
    tables = document.get("repo", [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise ValueError(f"{path}: `repo` must be an array of tables, written as [[repo]] headers")
    return repo_specs(path, text, tables)


def repo_specs(path: str, text: str, tables: list[dict]) -> list[RepoSpec]:
    """The [[repo]] tables of the TOML file `path` (its `text`, for line numbers) as specs, names unique."""
    specs, seen = [], {}
    for position, table in enumerate(tables):
        spec = _spec(path, text, position, table)
        if spec.name in seen:
            raise ValueError(
                f"{path}: [[repo]] #{position + 1} ({spec.name}): name {spec.name!r} is already used by [[repo]] "
                f"#{seen[spec.name] + 1}{_line_of(text, 'name', position)}; names must be unique"
            )
        seen[spec.name] = position
        specs.append(spec)
    return specs


def _spec(path: str, text: str, position: int, table: dict) -> RepoSpec:
    label = f"[[repo]] #{position + 1}" + (f" ({table['name']})" if isinstance(table.get("name"), str) else "")

    def fail(key: str, problem: str):
        raise ValueError(f"{path}: {label}: {problem}{_line_of(text, key, position)}")

    for key in table:
        if key not in _TYPES:
            fail(key, f"unknown key {key!r}; known keys: {', '.join(KNOWN_KEYS)}")
    for key in REQUIRED:
        if key not in table:
            fail("repo", f"missing required key {key!r}")
    if "sdist" in table:
        for key in GIT_KEYS:
            if key in table:
                fail(key, f"{key!r} and 'sdist' cannot both be set: a repository is url + ref or an sdist")
    elif not any(key in table for key in GIT_KEYS):
        fail("repo", "missing required key 'url' (or set `sdist = \"name==version\"` instead of url + ref)")
    else:
        for key in GIT_KEYS:
            if key not in table:
                fail("repo", f"missing required key {key!r}")
    values = {}
    for key, value in table.items():
        values[key] = _value(key, value, lambda problem, key=key: fail(key, problem))
    if not NAME.fullmatch(values["name"]):
        fail("name", f"name {values['name']!r} must be 1-100 letters, digits, '.', '_' or '-' (not first)")
    for key in GIT_KEYS:
        if key not in values:
            continue
        if not values[key] or values[key].startswith("-") or any(ch.isspace() or ord(ch) < 32 for ch in values[key]):
            fail(key, f"{key} {values[key]!r} must be non-empty, without spaces, and not start with '-'")
    if "sdist" in values:
        try:
            parse_pin(values["sdist"])
        except ValueError as error:
            fail("sdist", str(error))
    return RepoSpec(**values, input_ref=f"{path}:[[repo]] #{position + 1}")


def _value(key: str, value, fail):
    expected = _TYPES[key]
    if expected == "str":
        if not isinstance(value, str):
            fail(f"{key} must be a {expected}, not {type(value).__name__}")
        return value
    if expected == "str or list of str":
        if isinstance(value, str):
            return tuple(shlex.split(value)) if key == "test" else (value,)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            fail(f"{key} must be a {expected}")
        return tuple(value)
    if expected == "list of str":
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            fail(f"{key} must be a {expected} (non-empty globs)")
        for pattern in value:
            try:
                re.compile(glob_regex(pattern))
            except re.error as error:
                fail(f"{key} glob {pattern!r} is not valid ({error})")
        return tuple(value)
    if expected == "positive number":
        if type(value) not in _NUMBERS or not value > 0:
            fail(f"{key} must be a {expected}, got {value!r}")
        return float(value)
    if type(value) is not int or value < 1:
        fail(f"{key} must be a {expected}, got {value!r}")
    return value


def _line_of(text: str, key: str, position: int | None) -> str:
    """' (line N)' where `key` is set in the position-th [[repo]] table (or at top level), if found."""
    lines = text.splitlines()
    assignment = re.compile(r"\s*[\"']?%s[\"']?\s*=" % re.escape(key))
    if position is None:
        header = re.compile(r"\s*\[+\s*[\"']?%s[\"']?\s*[.\]]" % re.escape(key))
        in_tables = False
        for number, line in enumerate(lines):
            in_tables = in_tables or bool(re.match(r"\s*\[", line))
            if header.match(line) or (not in_tables and assignment.match(line)):
                return f" (line {number + 1})"
        return ""
    seen = -1
    for number, line in enumerate(lines):  # noqa: B007 (number is the line found, used below)
        if re.match(r"\s*\[\[\s*repo\s*\]\]", line):
            seen += 1
            if seen == position:
                break
    else:
        return ""
    if key == "repo":
        return f" (line {number + 1})"
    for later in range(number + 1, len(lines)):
        if re.match(r"\s*\[", lines[later]):
            break
        if assignment.match(lines[later]):
            return f" (line {later + 1})"
    return ""
