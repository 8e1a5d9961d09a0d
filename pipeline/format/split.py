"""The train / held-out split, by source: every trajectory and Go example of one program is on one side.

A source's side is a hash of its key, so the split needs no state, is the same on every machine and for
every run, and moves no existing source when the corpus grows. The key is the program: a function record's
`source_id`, a Go `program_id`, and for repository traces (`name@commit:path:qualname`) the repository
`name`, so no repository is split between training and evaluation.
"""

import hashlib

EVALUATION_SPLITS = ("heldout", "all")  # tracegen evaluate --split: held-out sources only, or every source


def split_key(source_id: str) -> str:
    if "@" in source_id and ":" in source_id.split("@", 1)[1]:
        return source_id.split("@", 1)[0]
    return source_id


def is_heldout(source_id: str, fraction: float) -> bool:
    """Whether the source is in the held-out share `fraction` (0: none, 1: every source)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the held-out fraction must be in 0..1, got {fraction!r}")
    digest = hashlib.sha256(split_key(source_id).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction
