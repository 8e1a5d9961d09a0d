"""pip requirement lines: their syntax, poetry's constraints written as them, and relaxed to bare names.

Standard library only.
"""

import re

NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
REQUIREMENT = re.compile(r"\s*(%s)\s*(\[[^\]]*\])?\s*(.*)$" % NAME.pattern, re.S)
ENVIRONMENT_MARKERS = frozenset(
    "python_version python_full_version sys_platform platform_system platform_machine platform_release "
    "platform_version platform_python_implementation implementation_name implementation_version os_name "
    "os.name sys.platform platform.version platform.machine platform.python_implementation".split()
)
MARKER_WORDS = frozenset(("and", "or", "not", "in"))


def normalize(name):
    """PEP 503 / 685 normalized name."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def strings(value):
    return [item.strip() for item in value if isinstance(item, str) and item.strip()] if isinstance(value, list) else []


def split_extras(text):
    """("path-or-name", [extras]) of `thing[a,b]`."""
    match = re.match(r"^(.*?)\[([^\]]*)\]\s*$", text.strip())
    if not match:
        return text.strip(), []
    return match.group(1).strip(), [extra.strip() for extra in match.group(2).split(",") if extra.strip()]


def logical_lines(text):
    """pip requirement-file lines: continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\r?\n", "", text)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(line)
    return out


def split_option(line):
    """(option, value) of an option line (`-r file`, `--requirement=file`, `-rfile`), or (None, line)."""
    if not line.startswith("-"):
        return None, line
    match = re.match(r"^(--[A-Za-z-]+)(?:[= ]\s*(.*))?$", line) or re.match(r"^(-[A-Za-z])\s*(.*)$", line)
    if not match:
        return line, ""
    return match.group(1), (match.group(2) or "").strip()


POETRY_VERSION = re.compile(r"\s*(\^|~=|~|==|!=|>=|<=|>|<|=)?\s*(\d+(?:\.\d+)*)((?:[.-]?[A-Za-z][\w.+-]*)?)\s*$")


def poetry_requirement(name, spec):
    """A poetry dependency (`name = "^1.2"` or `{version, extras, markers, ...}`) as a pip requirement line, or ""
    for what pip cannot take from the index: `python` itself, path, git and url dependencies."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or normalize(name) == "python":
        return ""
    if isinstance(spec, list):  # several constraints by python version or platform: the name alone
        return name
    extras, markers = [], ""
    if isinstance(spec, dict):
        if any(key in spec for key in ("path", "git", "url", "file")):
            return ""
        extras = [extra for extra in strings(spec.get("extras")) if NAME.fullmatch(extra)]
        markers = spec.get("markers") if isinstance(spec.get("markers"), str) else ""
        spec = spec.get("version", "*")
    if not isinstance(spec, str):
        return ""
    line = name + ("[%s]" % ",".join(extras) if extras else "") + poetry_constraint(spec)
    return line + (" ; " + markers if markers else "")


def poetry_constraint(spec):
    """Poetry's version constraint as PEP 440 (`^1.2.3` → `>=1.2.3,<2.0.0`); "" for any version and for what
    it does not write plainly (`||`, wildcards): the name alone is the relaxed step's reading anyway."""
    parts = [part for part in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", spec.strip()) if part]
    if not parts or "||" in spec or "*" in spec:
        return ""
    out = []
    for part in parts:
        match = POETRY_VERSION.match(part)
        if match is None:
            return ""
        operator, version, suffix = match.groups()
        numbers = [int(number) for number in version.split(".")]
        if operator in ("^", "~"):
            if operator == "^":  # the first non-zero part may not change
                at = next((i for i, number in enumerate(numbers) if number), len(numbers) - 1)
            else:  # ~1.2.3 and ~1.2: the minor may not change; ~1: the major
                at = min(1, len(numbers) - 1)
            upper = numbers[:at] + [numbers[at] + 1]
            out += [">=" + version + suffix, "<" + ".".join(map(str, upper))]
        else:
            out.append(("==" if operator in (None, "=") else operator) + version + suffix)
    return ",".join(out)


def relax(line):
    """A requirement line relaxed to its bare name: `name[extras]`, with its marker kept when the marker uses
    environment variables only (pip evaluates it: a requirement excluded for this Python stays excluded) and
    dropped otherwise (`extra == ...`); None for lines with no name (options, paths, URLs, `-e`)."""
    if line.startswith("-"):
        return None
    match = REQUIREMENT.match(line)
    if not match or line.startswith((".", "/", "~")) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", line):
        return None
    name, extras, rest = match.group(1), match.group(2) or "", match.group(3)
    if rest and not re.match(r"^(@|;|[<>=!~(]|$)", rest):  # `name:` / `name word`: not a requirement
        return None
    marker = rest.split(";", 1)[1].strip() if ";" in rest else ""
    if rest.startswith("@"):
        marker = re.split(r"\s;", rest, maxsplit=1)[1].strip() if re.search(r"\s;", rest) else ""
    return name + extras + ("; " + marker if marker and environment_only(marker) else "")


def environment_only(marker):
    """Whether every name in a PEP 508 marker is an environment variable (not `extra`)."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", re.sub(r"'[^']*'|\"[^\"]*\"", "", marker))
    return bool(words) and all(word in ENVIRONMENT_MARKERS or word in MARKER_WORDS for word in words)


def relaxed_lines(sources):
    """Every requirement of `sources` relaxed (`relax`), each once, in order."""
    out = []
    for source in sources:
        for line in source.lines:
            bare = relax(line)
            if bare and bare not in out:
                out.append(bare)
    return out
