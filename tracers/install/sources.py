"""Where a repository declares its test requirements, read as its CI would. Pure functions, standard library only.

`read_sources(src, is_package)` reads these sources, in this order (SOURCE_KINDS; one source per kind, except
requirements files: one per file):

1. `dependency-groups`: PEP 735 `[dependency-groups]` of pyproject.toml, the first group of TEST_NAMES
   (`test`, `tests`, `testing`), else `dev`; `{include-group = "..."}` entries are expanded, and a cycle, an
   unknown group or a non-list refuses the group (a note says why).
2. `poetry`, `pdm`, `uv`: the dependency groups of those tools, as their CI installs them (`poetry install --with
   test`, `pdm install -G test`, `uv sync`): `[tool.poetry.group.NAME.dependencies]` (the first of TEST_NAMES,
   else `dev`; else the legacy `[tool.poetry.dev-dependencies]`), poetry's constraints written as PEP 440
   (`^1.2` is `>=1.2,<2`, `~1.2` is `>=1.2,<1.3`, `1.2` is `==1.2`; a path, git or url dependency is left
   out); `[tool.pdm.dev-dependencies]` (the same names); `[tool.uv] dev-dependencies`.
3. `extra`: `[project.optional-dependencies]` of pyproject.toml, else `[options.extras_require]` of setup.cfg,
   the same names: installed as the package's extra (`pip install -e src[test]`).
4. `requirements`: requirements files matching REQUIREMENT_PATTERNS (`requirements.txt` too when the repository
   is not a package), at most MAX_FILES.
5. `tox`: `deps` of the test env of tox.ini (else `legacy_tox_ini` of pyproject.toml, else setup.cfg's
   `[tox:tox]`): the first env of `envlist` that is not a lint/docs/type-check env (TOX_NOT_TESTS), one matching
   this Python's `pyXY` preferred; its `[testenv:NAME]` deps, else `[testenv]`'s. `{toxinidir}` is the
   repository, `{[section]key}` is substituted, a `factors: requirement` line is kept when its factors match the
   env's (and this Python's `pyXY`), a line with any other `{...}` is skipped. The same env's `commands_pre`
   (what tox runs in the tree before the tests: compiling translations, generating files) is read by
   `prepare_commands`, for the install to run after installing.
6. `hatch`: `dependencies` and `extra-dependencies` of the first of HATCH_ENVS in `[tool.hatch.envs]` (strings
   only; `default`'s dependencies when the env has none of its own).
7. `nox`: string literals of `session.install(...)` calls in the first test session of noxfile.py, read with
   `ast` — the noxfile is never run.

Each source is pip requirement-file lines: requirements, `-e` paths and `-c` constraint files. `-r` files are
inlined (inside the repository only, MAX_DEPTH deep); other options (indexes, hashes) are dropped, since the
index is the host's. A line that names the repository itself (`-e .`, `.[test]`, `{toxinidir}`, the project's
own name) is not a requirement: its extras are added to the package's.

The syntax of requirement lines is tracers/install/requirements.py's; tox and nox are read by tox.py and nox.py.
Nothing here raises for what a repository holds: a file past MAX_FILE_BYTES, bad TOML or INI, a noxfile that does
not parse, values of the wrong type are skipped, with a note.
"""

import ast
import configparser
import glob
import os
import re
import sys

from tracers.install.nox import nox_lines, nox_test_session
from tracers.install.requirements import (
    REQUIREMENT,
    logical_lines,
    normalize,
    poetry_requirement,
    split_extras,
    split_option,
    strings,
)
from tracers.install.tox import tox_commands, tox_factors, tox_lines, tox_setting, tox_test_env

TEST_NAMES = ("test", "tests", "testing")
FALLBACK_NAME = "dev"
SOURCE_KINDS = ("dependency-groups", "poetry", "pdm", "uv", "extra", "requirements", "tox", "hatch", "nox")
REQUIREMENT_PATTERNS = (
    "requirements*test*.txt",
    "requirements*dev*.txt",
    "test*requirements*.txt",
    "dev*requirements*.txt",
    "requirements/*test*.txt",
    "requirements/dev*.txt",
    "tests/requirements*.txt",
    "test/requirements*.txt",
)
HATCH_ENVS = ("hatch-test", "test", "tests", "testing", "default")
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 8
MAX_DEPTH = 5
MAX_LINES = 500
MAX_LINE_CHARS = 1000
MAX_NOTES = 20


class Source:
    """One place the repository declares test requirements: `label` names it (`tox:testenv`), `lines` are pip
    requirement-file lines, `extras` the package's own extras it asks for."""

    def __init__(self, kind, name, lines=(), extras=()):
        self.kind, self.label = kind, "%s:%s" % (kind, name)
        self.lines, self.extras = list(lines), sorted(set(extras))

    def names(self):
        """The normalized project names this source requires."""
        found = set()
        for line in self.lines:
            match = None if line.startswith("-") else REQUIREMENT.match(line)
            if match:
                found.add(normalize(match.group(1)))
        return found

    def __repr__(self):
        return "Source(%r, lines=%r, extras=%r)" % (self.label, self.lines, self.extras)


class Reader:
    """Reads one repository's sources; `notes` says what was skipped and why."""

    def __init__(self, src, is_package=True, python=None):
        self.src, self.is_package = os.path.realpath(src), is_package
        self.python = python or sys.version_info[:2]
        self.notes = []
        self.pyproject = self.load_toml("pyproject.toml")
        self.setup_cfg = self.load_ini("setup.cfg")
        self.project = normalize(self.project_name() or "")

    # -- reading files, never raising -------------------------------------------------------------------------
    def note(self, text):
        if len(self.notes) < MAX_NOTES:
            self.notes.append(str(text)[:300])

    def inside(self, path):
        """The real path of `path` (relative to the repository) when it is a regular file inside it, else None."""
        full = os.path.realpath(os.path.join(self.src, path))
        if (full == self.src or full.startswith(self.src + os.sep)) and os.path.isfile(full):
            return full
        return None

    def read_text(self, path):
        full = self.inside(path)
        if full is None:
            return None
        try:
            if os.path.getsize(full) > MAX_FILE_BYTES:
                self.note("%s: larger than %d bytes, not read" % (os.path.relpath(full, self.src), MAX_FILE_BYTES))
                return None
            with open(full, "rb") as handle:
                return handle.read(MAX_FILE_BYTES + 1).decode("utf-8", "replace")
        except OSError as error:
            self.note("%s: %s" % (path, error))
            return None

    def load_toml(self, path):
        text = self.read_text(path)
        if text is None:
            return {}
        try:
            import tomllib

            return tomllib.loads(text)
        except Exception as error:  # TOMLDecodeError, RecursionError on deep nesting
            self.note("%s: not read (%s)" % (path, type(error).__name__))
            return {}

    def load_ini(self, path, text=None):
        text = self.read_text(path) if text is None else text
        if text is None:
            return None
        parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
        parser.optionxform = str
        try:
            parser.read_string(text, source=path)
        except Exception as error:
            self.note("%s: not read (%s)" % (path, type(error).__name__))
            return None
        return parser

    def table(self, *keys):
        """pyproject.toml's value at `keys`, when it is a table; else {}."""
        value = self.pyproject
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, dict) else {}

    def project_name(self):
        for name in (self.table("project").get("name"), self.table("tool", "poetry").get("name")):
            if isinstance(name, str):
                return name
        if self.setup_cfg is not None and self.setup_cfg.has_option("metadata", "name"):
            return self.setup_cfg.get("metadata", "name")
        return setup_py_name(self.read_text("setup.py"))

    def declared_names(self):
        """Every distribution the repository names as a requirement in pyproject.toml or setup.cfg: its
        dependencies, all its extras and dependency groups (normalized; for the repair's module lookup)."""
        lists = [self.table("project").get("dependencies")]
        lists += list(self.table("project", "optional-dependencies").values())
        groups = self.pyproject.get("dependency-groups")
        lists += list(groups.values()) if isinstance(groups, dict) else []
        lines = [line for value in lists for line in strings(value)]
        if self.setup_cfg is not None and self.setup_cfg.has_section("options.extras_require"):
            lines += [
                line for _, value in self.setup_cfg.items("options.extras_require") for line in value.splitlines()
            ]
        matches = (REQUIREMENT.match(line) for line in lines)
        return {normalize(match.group(1)) for match in matches if match} - {self.project}

    # -- the sources, in SOURCE_KINDS order ---------------------------------------------------------------------
    def sources(self):
        found = []
        for kind in SOURCE_KINDS:
            try:
                found += getattr(self, "read_" + kind.replace("-", "_"))()
            except Exception as error:  # a reader's own bug must never stop the install
                self.note("%s: not read (%s: %s)" % (kind, type(error).__name__, error))
        return found

    def read_dependency_groups(self):
        groups = self.pyproject.get("dependency-groups")
        if not isinstance(groups, dict):
            return []
        names = {normalize(key): key for key in groups if isinstance(key, str)}
        name = first_test_name(names)
        if name is None:
            return []
        try:
            requirements = dependency_group(groups, name)
        except ValueError as error:
            self.note("dependency-groups:%s: %s" % (name, error))
            return []
        return [self.source("dependency-groups", name, requirements)]

    def read_poetry(self):
        poetry = self.table("tool", "poetry")
        groups = poetry.get("group") if isinstance(poetry.get("group"), dict) else {}
        names = {normalize(key): key for key, group in groups.items() if isinstance(group, dict)}
        name = first_test_name(names)
        if name is not None:
            table = groups[name].get("dependencies")
        else:
            name, table = "dev-dependencies", poetry.get("dev-dependencies")
        if not isinstance(table, dict):
            return []
        lines = [line for key, spec in table.items() for line in [poetry_requirement(key, spec)] if line]
        return [self.source("poetry", name, lines)] if lines else []

    def read_pdm(self):
        groups = self.table("tool", "pdm").get("dev-dependencies")
        if not isinstance(groups, dict):
            return []
        name = first_test_name({normalize(key): key for key in groups if isinstance(key, str)})
        if name is None:
            return []
        lines = [line for line in strings(groups[name]) if "${" not in line]  # ${PROJECT_ROOT} paths: itself
        return [self.source("pdm", name, lines)] if lines else []

    def read_uv(self):
        lines = strings(self.table("tool", "uv").get("dev-dependencies"))
        return [self.source("uv", "dev-dependencies", lines)] if lines else []

    def read_extra(self):
        extras, where = self.table("project").get("optional-dependencies"), "pyproject.toml"
        if not isinstance(extras, dict) and self.setup_cfg is not None:
            section = "options.extras_require"
            if self.setup_cfg.has_section(section):
                extras = {key: value.splitlines() for key, value in self.setup_cfg.items(section)}
                where = "setup.cfg"
        if not isinstance(extras, dict) or not self.is_package:
            return []
        name = first_test_name({normalize(key): key for key in extras if isinstance(key, str)})
        if name is None:
            return []
        source = Source("extra", name, extras=[name])
        try:
            source.lines = [line for line in extra_requirements(extras, name, self.project) if line]
        except ValueError as error:
            self.note("extra:%s (%s): %s" % (name, where, error))
        return [source]

    def read_requirements(self):
        patterns = ([] if self.is_package else ["requirements.txt"]) + list(REQUIREMENT_PATTERNS)
        seen, found = set(), []
        for pattern in patterns:
            for path in sorted(glob.glob(pattern, root_dir=self.src)):
                full = self.inside(path)
                if full is None or full in seen:
                    continue
                seen.add(full)
                if len(found) == MAX_FILES:
                    self.note("requirements: more than %d files, %s and later not read" % (MAX_FILES, path))
                    return found
                text = self.read_text(path)
                if text is not None:
                    found.append(self.source("requirements", path, self.requirement_file(text, full, 0)))
        return found

    def tox_env(self):
        """(parser, env) of the tox test env (tox.ini, else pyproject's `legacy_tox_ini`, else setup.cfg's
        `[tox:tox]`), or None."""
        parser, main = self.load_ini("tox.ini"), "tox"
        legacy = self.table("tool", "tox").get("legacy_tox_ini")
        if parser is None and isinstance(legacy, str):
            parser = self.load_ini("pyproject.toml", legacy)
        if parser is None and self.setup_cfg is not None and self.setup_cfg.has_section("tox:tox"):
            parser, main = self.setup_cfg, "tox:tox"
        env = None if parser is None else tox_test_env(parser, main, self.python)
        return None if env is None else (parser, env)

    def read_tox(self):
        found = self.tox_env()
        if found is None:
            return []
        parser, env = found
        section, text = tox_setting(parser, env, "deps")
        if section is None:
            return []
        lines = tox_lines(text, tox_factors(env, self.python), self.src)
        return [self.source("tox", section, self.requirement_lines(lines, self.src, 0))]

    def prepare_commands(self, venv):
        """What the repository's CI runs in the tree after installing and before its tests: the tox test env's
        `commands_pre` (tox.py's `tox_commands`, for the venv at `venv`), as (argv, ignore_errors, text)."""
        found = self.tox_env()
        if found is None:
            return []
        parser, env = found
        _, text = tox_setting(parser, env, "commands_pre")
        bindir = os.path.join(venv, "bin")
        paths = {"envpython": os.path.join(bindir, "python"), "envbindir": bindir, "envdir": venv}
        paths["toxinidir"] = self.src
        return tox_commands(text, tox_factors(env, self.python), paths)

    def read_hatch(self):
        envs = self.table("tool", "hatch", "envs")
        name = next((name for name in HATCH_ENVS if isinstance(envs.get(name), dict)), None)
        if name is None:
            return []
        env = envs[name]
        own = env.get("dependencies")
        default = envs.get("default") if isinstance(envs.get("default"), dict) else {}
        inherits = name not in ("default", "hatch-test") and env.get("template", "default") == "default"
        if own is None and inherits:
            own = default.get("dependencies")
        requirements = strings(own) + strings(env.get("extra-dependencies"))
        requirements = [line for line in requirements if "{" not in line]
        return [self.source("hatch", name, requirements)] if requirements else []

    def read_nox(self):
        text = self.read_text("noxfile.py")
        if text is None:
            return []
        try:
            tree = ast.parse(text, "noxfile.py")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            self.note("noxfile.py: not parsed (%s)" % type(error).__name__)
            return []
        session = nox_test_session(tree)
        if session is None:
            return []
        name, args = session
        return [self.source("nox", name, self.requirement_lines(nox_lines(args), self.src, 0))]

    # -- requirement lines ------------------------------------------------------------------------------------
    def source(self, kind, name, lines):
        """A source of pip lines: lines naming the repository itself become the package's extras."""
        source = Source(kind, name)
        extras = set()
        for line in lines[:MAX_LINES]:
            own = self.own_extras(line)
            if own is not None:
                extras.update(own)
            else:
                source.lines.append(line)
        source.extras = sorted(extras)
        return source

    def own_extras(self, line):
        """The extras a line asks of the repository's own package (a set, maybe empty), or None when the line
        is about something else."""
        text = line[2:].strip() if line.startswith("-e") else line
        if line.startswith("-") and not line.startswith("-e"):
            return None
        path, extras = split_extras(text)
        if path.startswith("file:"):
            path = re.sub(r"^file:(//)?", "", path)
        if path.startswith((".", "/", "~")):
            full = os.path.realpath(os.path.join(self.src, os.path.expanduser(path)))
            return set(extras) if full == self.src else None
        match = REQUIREMENT.match(text)
        if match and self.project and normalize(match.group(1)) == self.project and "@" not in match.group(3):
            return set(split_extras(match.group(1) + (match.group(2) or ""))[1])
        return None

    def requirement_file(self, text, path, depth):
        return self.requirement_lines(logical_lines(text), os.path.dirname(path), depth)

    def requirement_lines(self, lines, base, depth):
        """pip requirement-file `lines` (relative paths from `base`) as this module's source lines: `-r` inlined,
        `-c` made absolute, other options and hashes dropped."""
        out = []
        for line in lines:
            option, value = split_option(line)
            if option in ("-r", "--requirement"):
                nested = self.inside(os.path.join(base, value)) if value else None
                if nested is None or depth >= MAX_DEPTH:
                    self.note("-r %s: not inside the repository or too deep, skipped" % value)
                    continue
                text = self.read_text(nested)
                out += self.requirement_file(text, nested, depth + 1) if text is not None else []
            elif option in ("-c", "--constraint"):
                constraint = self.inside(os.path.join(base, value)) if value else None
                out += ["-c " + constraint] if constraint else []
            elif option in ("-e", "--editable"):
                out += ["-e " + value] if value else []
            elif option is None:
                requirement = re.sub(r"\s--hash[= ]\S+", "", " " + line).strip()
                out += [requirement] if requirement else []
            if len(out) >= MAX_LINES:
                self.note("more than %d requirement lines, the rest skipped" % MAX_LINES)
                return out[:MAX_LINES]
        return [line[:MAX_LINE_CHARS] for line in out]


def read_sources(src, is_package=True, python=None):
    """(the repository's sources in SOURCE_KINDS order, notes on what was skipped)."""
    reader = Reader(src, is_package, python)
    return reader.sources(), reader.notes


# -- names, groups, extras ------------------------------------------------------------------------------------
def first_test_name(names):
    """The key of `names` ({normalized: original}) to install: the first of TEST_NAMES, else FALLBACK_NAME."""
    for name in TEST_NAMES + (FALLBACK_NAME,):
        if name in names:
            return names[name]
    return None


def dependency_group(groups, name):
    """PEP 735: the requirement strings of group `name`, `{include-group = ...}` expanded; ValueError for a
    cycle, an unknown group, a group that is not a list, or more than MAX_LINES requirements."""
    table = {normalize(key): value for key, value in groups.items() if isinstance(key, str)}
    done = {}

    def expand(group, trail):
        if group in trail:
            raise ValueError("include-group cycle %s" % " -> ".join(trail + [group]))
        if group in done:
            return done[group]
        if group not in table or not isinstance(table[group], list):
            raise ValueError("group %r is %s" % (group, "not a list" if group in table else "not defined"))
        if len(trail) > MAX_DEPTH * 4:
            raise ValueError("include-group nesting deeper than %d" % (MAX_DEPTH * 4))
        out = []
        for item in table[group]:
            if isinstance(item, str):
                out.append(item.strip())
            elif isinstance(item, dict) and list(item) == ["include-group"] and isinstance(item["include-group"], str):
                out += expand(normalize(item["include-group"]), trail + [group])
            if len(out) > MAX_LINES:
                raise ValueError("more than %d requirements" % MAX_LINES)
        done[group] = out
        return out

    return [line for line in expand(normalize(name), []) if line]


def extra_requirements(extras, name, project):
    """The requirement strings of extra `name`; one that names the project itself (`pkg[other]`) is replaced by
    that extra's requirements. ValueError for a cycle or more than MAX_LINES requirements."""
    table = {normalize(key): strings(value) for key, value in extras.items() if isinstance(key, str)}
    out, seen, queue = [], set(), [normalize(name)]
    while queue:
        extra = queue.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for line in table.get(extra, []):
            match = REQUIREMENT.match(line)
            if match and project and normalize(match.group(1)) == project:
                queue += [normalize(other) for other in split_extras(match.group(1) + (match.group(2) or ""))[1]]
            else:
                out.append(line)
        if len(out) > MAX_LINES:
            raise ValueError("more than %d requirements" % MAX_LINES)
    return out


def setup_py_name(text):
    """`name="..."` of setup.py's `setup(...)` call when it is a string literal."""
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "setup":
            for keyword in node.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return keyword.value.value if isinstance(keyword.value.value, str) else None
    return None
