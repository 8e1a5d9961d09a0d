"""Per-program run timeouts: a header comment in the program, or an entry of the programs manifest.

A corpus mixes programs that deadlock at once with ones that legitimately run for seconds, so one
`--timeout` fits neither. Two ways to give a program its own (the manifest wins over the header, and
either over `--timeout`):

- a header comment in any top-level `.go` file of the program, among the comments above its `package`
  clause: `// tracegen: timeout=30s` (Go duration syntax: a number and a unit ms, s, m or h, e.g. 500ms,
  1.5s, 1m30s). Keys other than `timeout` are an error (a typo would silently keep the default).
- `tracegen.toml` at the top of `--programs`: `[program."ID"]` tables with `timeout = "30s"` (or a number
  of seconds), ID being the program id (its directory relative to `--programs`).

Every timeout must lie in 0.01 .. 3600 s (as `--timeout`). A bad header is the program's error
(`HeaderError`, which discovery turns into a failure row); a bad manifest is the job's (`ValueError`,
before any work). Both messages name the program, where the value is, and how to fix it.
"""

import re
import tomllib
from pathlib import Path

MANIFEST = "tracegen.toml"
MIN_S, MAX_S = 0.01, 3600.0
HEADER = re.compile(r"//\s*tracegen:(.*)$")
PACKAGE = re.compile(r"\s*package\s")
DURATION = re.compile(r"(?:(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h))+")
PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
EXAMPLE = "e.g. 500ms, 30s or 1m30s"


class HeaderError(ValueError):
    """A program's `// tracegen:` header is malformed; the message names the file, the line and the fix."""


def parse_duration(text: str) -> float | None:
    """Seconds of a Go-style duration ('1m30s', '500ms'); None when `text` is not one."""
    if not DURATION.fullmatch(text):
        return None
    return sum(float(number) * UNIT_S[unit] for number, unit in PART.findall(text))


def _in_range(seconds: float) -> bool:
    return MIN_S <= seconds <= MAX_S


def _header_lines(file: Path):
    """(line number, text after `tracegen:`) of the header comments above the package clause."""
    for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if PACKAGE.match(line):
            return
        match = HEADER.match(line.strip())
        if match:
            yield number, match.group(1).strip()


def header_timeout(program_dir: Path) -> float | None:
    """The timeout (seconds) the program's header comments give, None when none does; HeaderError when one
    is malformed, out of range, or two files disagree."""
    found: dict[float, str] = {}
    for file in sorted(program_dir.glob("*.go")):
        if not file.is_file() or file.is_symlink():
            continue
        for number, text in _header_lines(file):
            where = f"{file.name}:{number}"
            for item in text.replace(",", " ").split():
                key, _, value = item.partition("=")
                if key != "timeout" or not value:
                    raise HeaderError(
                        f"header comment {where}: {item!r} is not timeout=DURATION; write "
                        f"`// tracegen: timeout=30s` (the only key; a duration {EXAMPLE})"
                    )
                seconds = parse_duration(value)
                if seconds is None or not _in_range(seconds):
                    raise HeaderError(
                        f"header comment {where}: timeout={value!r} is not a duration between {MIN_S:g}s and "
                        f"{MAX_S:g}s; write e.g. `// tracegen: timeout=30s` ({EXAMPLE})"
                    )
                found.setdefault(seconds, where)
    if len(found) > 1:
        places = ", ".join(f"{where} says {seconds:g}s" for seconds, where in found.items())
        raise HeaderError(f"header comments disagree on the timeout ({places}); keep one `// tracegen: timeout=`")
    return next(iter(found), None)


def manifest_timeouts(programs_dir: Path, program_ids: set[str]) -> dict[str, float]:
    """{program id: seconds} from `programs_dir/tracegen.toml` ({} without one); ValueError naming the file,
    the program and the fix for anything malformed, unknown or out of range."""
    path = programs_dir / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid TOML ({error}); fix the file or remove it") from None
    unknown = sorted(set(data) - {"program"})
    if unknown or not isinstance(data.get("program", {}), dict):
        raise ValueError(
            f"{path}: unknown top-level key(s) {', '.join(unknown) or 'program'}; the file holds only "
            f'[program."ID"] tables, e.g. [program."slow/sim"] timeout = "30s"'
        )
    timeouts = {}
    for program_id, entry in sorted(data.get("program", {}).items()):
        where = f'{path}: [program."{program_id}"]'
        if program_id not in program_ids:
            raise ValueError(
                f"{where} names no program under {programs_dir}; use the program's directory relative to "
                f"--programs (known: {', '.join(sorted(program_ids)[:5])}{', ...' if len(program_ids) > 5 else ''})"
            )
        if not isinstance(entry, dict) or set(entry) != {"timeout"}:
            keys = ", ".join(sorted(entry)) if isinstance(entry, dict) else type(entry).__name__
            raise ValueError(f'{where} has {keys}; it takes exactly one key, timeout = "30s"')
        value = entry["timeout"]
        seconds = (
            float(value)
            if isinstance(value, int | float) and not isinstance(value, bool)
            else parse_duration(value)
            if isinstance(value, str)
            else None
        )
        if seconds is None or not _in_range(seconds):
            raise ValueError(
                f"{where}: timeout = {value!r} is not a duration between {MIN_S:g}s and {MAX_S:g}s; write "
                f'e.g. timeout = "30s" ({EXAMPLE}) or a number of seconds'
            )
        timeouts[program_id] = seconds
    return timeouts
