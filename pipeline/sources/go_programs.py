"""Go programs from a directory: each subdirectory holding `.go` files is one program.

`--programs DIR` is scanned in sorted order. A directory with at least one `.go` file at its top is a
program — a `main` package, or a package whose `_test.go` files declare `func TestX(t *testing.T)`
(then it runs as a test) — and its subdirectories belong to it (sub-packages it may import). A
directory without `.go` files is a group: its subdirectories are scanned the same way, so programs
can be organised in folders; a group that holds no program at all is reported as `NotAGoProgram`.
The program id is the directory's path relative to DIR (posix). Names starting with `.` or `_`, and
`testdata`/`vendor`, are skipped as Go does; symbolic links are never followed (reported instead).
A `go.mod` is optional: the harness writes `module prog` when there is none.

Per-program timeouts (pipeline/sources/go_timeouts.py): a `// tracegen: timeout=30s` comment above the
package clause, or an entry of `DIR/tracegen.toml`; a bad header makes the program a failure row naming
the file, the line and the fix, a bad manifest stops the job before any work.
"""

import hashlib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.sources.go_timeouts import HeaderError, header_timeout, manifest_timeouts

TEST_FUNC = re.compile(rb"(?m)^func\s+(Test[A-Za-z0-9_]*)\s*\(\s*\w+\s+\*testing\.T\s*\)")
MODULE_LINE = re.compile(rb'(?m)^module\s+"?([^\s"]+)"?')
SKIPPED = ("testdata", "vendor")


@dataclass(frozen=True)
class GoProgram:
    """One program directory. `mode` is test when a `_test.go` file declares func TestX(t *testing.T)."""

    program_id: str
    path: str
    mode: str
    module_path: str
    timeout_s: float | None = None  # None: the job's --timeout
    timeout_source: str = "default"  # default | header | manifest (schemas/go_programs.py)

    @property
    def file_prefix(self) -> str:
        """What the harness strips from file names: the module path and a slash."""
        return self.module_path + "/" if self.module_path else ""


@dataclass(frozen=True)
class NotAProgram:
    """A directory under --programs that holds no Go program; it becomes a failure row."""

    program_id: str
    path: str
    reason: str
    error_type: str = "NotAGoProgram"


def program_mode(path: Path) -> str:
    """main or test, decided the way the harness's `-mode auto` does."""
    for test_file in sorted(path.glob("*_test.go")):
        if test_file.is_file() and TEST_FUNC.search(test_file.read_bytes()):
            return "test"
    return "main"


def module_path(path: Path) -> str:
    """The module path of the program's go.mod; 'prog' (what the harness writes) when there is none."""
    go_mod = path / "go.mod"
    if not go_mod.is_file():
        return "prog"
    match = MODULE_LINE.search(go_mod.read_bytes())
    return match.group(1).decode("utf-8", "replace") if match else ""


def _has_go_files(path: Path) -> bool:
    return any(entry.is_file(follow_symlinks=False) and entry.name.endswith(".go") for entry in os.scandir(path))


def _entries(path: Path) -> list[os.DirEntry]:
    return sorted(
        (e for e in os.scandir(path) if not e.name.startswith((".", "_")) and e.name not in SKIPPED),
        key=lambda e: e.name,
    )


def program_files(path: str) -> list[tuple[str, bytes]]:
    """The program's text build inputs (schemas/go_programs.py): every `.go` file below `path`, its go.mod
    and go.sum, as (posix path relative to `path`, bytes), in path order; links are not followed."""
    root = Path(path)
    found = []
    for file in root.rglob("*"):
        if file.is_file() and not file.is_symlink() and (file.suffix == ".go" or file.name in ("go.mod", "go.sum")):
            found.append((file.relative_to(root).as_posix(), file.read_bytes()))
    return sorted(found)


def program_hash(files: list[tuple[str, bytes]]) -> str:
    """hex sha256 over each file's path, NUL, bytes, NUL, in the given (path) order."""
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def directory_digest(path: str) -> str:
    """sha256 over the relative names and bytes of the regular files below `path` (links not followed)."""
    digest = hashlib.sha256()
    root = Path(path)
    for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


def discover_programs(programs_dir: str) -> list[GoProgram | NotAProgram]:
    """Every program (and every directory that is not one) under `programs_dir`, sorted by id."""
    root = Path(programs_dir).expanduser()
    if not root.is_dir():
        raise ValueError(
            f"--programs {programs_dir!r} is not a directory; pass a directory whose subdirectories are Go programs"
        )
    root = root.resolve()
    found: list[GoProgram | NotAProgram] = []

    def scan(directory: Path) -> int:
        programs = 0
        for entry in _entries(directory):
            path = directory / entry.name
            program_id = path.relative_to(root).as_posix()
            if entry.is_symlink():
                if entry.is_dir():  # a linked file is just not a program; a linked directory might be one
                    found.append(
                        NotAProgram(
                            program_id,
                            str(path),
                            "is a symbolic link; links are not followed, copy the program into --programs",
                        )
                    )
                continue
            if not entry.is_dir():
                continue
            if _has_go_files(path):
                found.append(_program(program_id, path))
                programs += 1
                continue
            mark = len(found)
            if scan(path):
                programs += 1
            else:
                del found[mark:]  # one row for the whole group, not one per empty subdirectory
                found.append(
                    NotAProgram(
                        program_id,
                        str(path),
                        "holds no .go file (in it or below); a program is a directory of .go files",
                    )
                )
        return programs

    scan(root)
    programs = {item.program_id for item in found if isinstance(item, GoProgram) or item.error_type != "NotAGoProgram"}
    overrides = manifest_timeouts(root, programs)
    found = [
        replace(item, timeout_s=overrides[item.program_id], timeout_source="manifest")
        if isinstance(item, GoProgram) and item.program_id in overrides
        else item
        for item in found
    ]
    return sorted(found, key=lambda item: item.program_id)


def _program(program_id: str, path: Path) -> GoProgram | NotAProgram:
    """The program in `path`, with its header timeout; a bad header makes it a NotAProgram."""
    try:
        timeout = header_timeout(path)
    except HeaderError as error:
        return NotAProgram(program_id, str(path), str(error), "BadProgramHeader")
    program = GoProgram(program_id, str(path), program_mode(path), module_path(path))
    return replace(program, timeout_s=timeout, timeout_source="header") if timeout is not None else program
