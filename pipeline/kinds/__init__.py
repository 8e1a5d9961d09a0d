"""The job kinds, listed explicitly: the CLI and `jobs/` loop over `KINDS` (pipeline/engine/kind.py is the
contract each one fulfils)."""

from pipeline.engine.kind import JobKind
from pipeline.kinds.functions import FunctionsKind
from pipeline.kinds.go import GoKind
from pipeline.kinds.pack import PackKind
from pipeline.kinds.rederive_go import RederiveKind
from pipeline.kinds.repos import ReposKind
from pipeline.kinds.resample import ResampleKind

KINDS: tuple[JobKind, ...] = (FunctionsKind(), ReposKind(), GoKind(), ResampleKind(), RederiveKind(), PackKind())


def kind_named(command: str) -> JobKind:
    """The kind whose command is `command`; a ValueError lists the choices."""
    for kind in KINDS:
        if kind.command == command:
            return kind
    raise ValueError(f"unknown job kind {command!r}: choose one of {', '.join(k.command for k in KINDS)}")
