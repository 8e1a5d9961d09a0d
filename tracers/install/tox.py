"""tox's test env, its `deps` and its `commands_pre`, read from tox.ini, pyproject's `legacy_tox_ini` or setup.cfg
(tox itself is never run).

Standard library only.
"""

import re
import shlex

from tracers.install.requirements import logical_lines

MAX_SUBSTITUTED = (1 << 20) // 4  # a substituted value's characters: a quarter of the largest file read
TOX_NOT_TESTS = frozenset(
    "lint linters flake8 pylint ruff black isort format fmt style pep8 codestyle mypy pyright typing types type "
    "typecheck docs doc docs-linkcheck linkcheck spell spelling readme manifest packaging package build release "
    "publish upload clean report coverage-report coverage_report bandit security safety precommit pre-commit "
    "check checks bump changelog dev devenv".split()
)


def expand_braces(text):
    """tox's generative names: `py{38,39}-django` -> [py38-django, py39-django] (bounded)."""
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    out = []
    for part in match.group(1).split(","):
        out += expand_braces(text[: match.start()] + part.strip() + text[match.end() :])
        if len(out) > 256:
            break
    return out[:256]


def tox_envs(value):
    """The env names of an `envlist` value (commas or newlines, braces expanded)."""
    names, depth, current = [], 0, ""
    for char in value:
        if char in ",\n" and depth == 0:
            names.append(current)
            current = ""
            continue
        depth += (char == "{") - (char == "}")
        current += char
    names.append(current)
    out = []
    for name in names:
        out += [env.strip() for env in expand_braces(name.strip()) if env.strip()]
    return out


def python_factor(python):
    return "py%d%d" % tuple(python[:2])


def is_test_env(name):
    return not any(factor.lower() in TOX_NOT_TESTS for factor in re.split(r"[-_]", name))


def tox_test_env(parser, main="tox", python=(3, 11)):
    """The env to read: the first test env of envlist (one with this Python's factor preferred), else
    `testenv` when there is a [testenv] section; None when neither."""
    value = ""
    for key in ("envlist", "env_list"):
        if parser.has_option(main, key):
            value = parser.get(main, key)
    envs = [env for env in tox_envs(value) if is_test_env(env)]
    mine = [env for env in envs if python_factor(python) in env.split("-")]
    if mine or envs:
        return (mine or envs)[0]
    sections = [name[len("testenv:") :] for name in parser.sections() if name.startswith("testenv:")]
    tests = [name for name in sections if is_test_env(name) and "{" not in name]
    if parser.has_section("testenv"):
        return "testenv"
    return tests[0] if tests else None


def tox_setting(parser, env, key):
    """(section label, text) of `env`'s `key` (`deps`, `commands_pre`): its own section (generative section names
    expanded), else [testenv]; (None, "") when neither has it."""
    for section in parser.sections():
        if section.startswith("testenv:") and env in expand_braces(section[len("testenv:") :]):
            if parser.has_option(section, key):
                return "testenv:" + env, substitute(parser, parser.get(section, key))
    if parser.has_option("testenv", key):
        return "testenv", substitute(parser, parser.get("testenv", key))
    return None, ""


def substitute(parser, text, depth=0):
    """`{[section]key}` references replaced by their values (3 levels)."""

    def value(match):
        section, key = match.group(1), match.group(2)
        if depth < 3 and parser.has_option(section, key):
            return substitute(parser, parser.get(section, key), depth + 1)
        return ""

    return re.sub(r"\{\[([^\]]+)\]([^}]+)\}", value, text)[:MAX_SUBSTITUTED]


def tox_factors(env, python):
    factors = set(env.split("-"))
    if env == "testenv" or not any(re.fullmatch(r"py\d*|pypy\d*", factor) for factor in factors):
        factors.add(python_factor(python))
    return factors


def factors_match(condition, factors):
    """tox: `a,b` means either, `a-b` both, `!a` not a."""
    for alternative in expand_braces(condition):
        for option in alternative.split(","):
            parts = [part.strip() for part in option.split("-") if part.strip()]
            if parts and all(
                (part[1:] not in factors) if part.startswith("!") else (part in factors) for part in parts
            ):
                return True
    return False


def tox_lines(text, factors, toxinidir):
    """The deps lines that apply to an env with `factors`, `{toxinidir}` substituted; others with `{...}` skipped."""
    out = []
    for line in logical_lines(text):
        match = re.match(r"^([A-Za-z0-9_.!{},-]+)\s*:\s*(.*)$", line)
        if match and not match.group(2).startswith("//"):
            if not factors_match(match.group(1), factors):
                continue
            line = match.group(2).strip()
        line = line.replace("{toxinidir}", toxinidir)
        if line and "{" not in line:
            out.append(line)
    return out


FACTOR_PREFIX = re.compile(r"^([A-Za-z0-9_.!{},-]+)\s*:\s+(.*)$")
TOX_VARIABLE = re.compile(r"\{(envpython|envbindir|envdir|toxinidir|posargs|env:[A-Za-z_]\w*)(?::([^{}]*))?\}")
MAX_COMMANDS = 16


def tox_commands(text, factors, paths):
    """The commands of a tox `commands_pre` value for an env with `factors`, as (argv, ignore_errors, text as written,
    tox's variables unexpanded: the same on every machine): one per
    line (`\\` continues one), a `factors: command` line kept when its factors match; `{envpython}`,
    `{envbindir}`, `{envdir}` and `{toxinidir}` from `paths`, `{posargs}` and `{env:NAME}` their defaults (or
    nothing); a leading `-` (tox: its exit status is ignored) noted. A command left with a `{...}` only tox knows,
    or that does not split as a shell line, is left out. At most MAX_COMMANDS."""

    def variable(match):
        name, default = match.group(1), match.group(2)
        return paths[name] if name in paths else (default or "")

    out = []
    for line in re.sub(r"\s*\\\r?\n\s*", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = FACTOR_PREFIX.match(line)
        if match:
            if not factors_match(match.group(1), factors):
                continue
            line = match.group(2).strip()
        ignore_errors = line.startswith("-")
        written = line[1:].strip() if ignore_errors else line
        line = TOX_VARIABLE.sub(variable, written).replace("{/}", "/").replace("{:}", ":")
        try:
            argv = shlex.split(line)
        except ValueError:
            continue
        if argv and "{" not in line and len(out) < MAX_COMMANDS:
            out.append((argv, ignore_errors, written))
    return out
