"""Near-duplicate function records, found with MinHash LSH (datasketch) before anything is traced.

Normalisation (what makes two records "the same function"):
  * the code is split into Python tokens; comments, blank lines and indentation tokens are dropped, so
    reformatting does not matter;
  * every identifier that is not a keyword or a builtin becomes `v<k>`, numbered by first appearance, so
    renaming variables, arguments or helpers does not matter; literals and operators are kept;
  * every shingle is prefixed with the entry name and the input's tokens (formatting dropped): the same
    function called with another input shares no shingle with it (its trace differs), so it is kept.
Code that does not tokenize falls back to its whitespace-separated words.
Shingles are windows of `shingle` consecutive normalised tokens. Signatures are MinHash with `num_perm`
permutations and a fixed seed; the LSH index uses `threshold` (estimated Jaccard similarity) and a
candidate is confirmed only when its estimated similarity reaches the threshold.
The result is defined by `resolve_duplicates`, the serial resolution: records in order, each queried against
an index of the records kept so far, a candidate confirmed when its estimated similarity reaches the
threshold, the first (lowest-position) confirmed one named; a record with none is kept and indexed.

From `DISTRIBUTED_DEDUP_FROM` records on (20,000; pipeline/kinds/functions.py) the same result is computed by
tasks that never hold every signature (pipeline/stages/dedup_distributed.py).
"""

import builtins
import io
import keyword
import tokenize
from dataclasses import dataclass
from typing import cast

import numpy as np
from datasketch import MinHash, MinHashLSH

_SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_KEPT_NAMES = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))
SCHEME = "affine32"  # pinned: signatures must stay comparable across datasketch versions


@dataclass(frozen=True)
class DedupSettings:
    """MinHash LSH parameters; `enabled=False` keeps every record."""

    enabled: bool = True
    num_perm: int = 128
    threshold: float = 0.8
    shingle: int = 5
    seed: int = 1

    def __post_init__(self):
        if not 16 <= self.num_perm <= 1024:
            raise ValueError(f"dedup num_perm must be in 16..1024, got {self.num_perm}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"dedup threshold must be in (0, 1], got {self.threshold}")
        if self.shingle < 1:
            raise ValueError(f"dedup shingle must be >= 1, got {self.shingle}")


def normalised_tokens(code: str, rename: bool = True) -> list[str]:
    """The code as tokens with formatting dropped and (with `rename`) identifiers numbered."""
    names: dict[str, str] = {}
    tokens = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in _SKIP:
                continue
            text = token.string
            if rename and token.type == tokenize.NAME and text not in _KEPT_NAMES:
                text = names.setdefault(text, f"v{len(names)}")
            tokens.append(text)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code.split()
    return tokens


def shingles(code: str, entry: str, input_text: str, width: int) -> set[str]:
    """Windows of `width` normalised tokens, each keyed by the entry and the input."""
    tokens = normalised_tokens(code)
    key = entry + "(" + " ".join(normalised_tokens(input_text, rename=False)) + ")|"
    return {key + " ".join(tokens[i : i + width]) for i in range(max(1, len(tokens) - width + 1))}


def signature(doc: tuple[str, str, str], settings: DedupSettings) -> np.ndarray:
    """MinHash hash values of a (code, entry, input) document (deterministic: fixed seed and scheme)."""
    shingle_set = shingles(*doc, settings.shingle)
    minhash = MinHash(num_perm=settings.num_perm, seed=settings.seed, scheme=SCHEME)
    minhash.update_batch([shingle.encode() for shingle in sorted(shingle_set)])
    return minhash.hashvalues


def signatures(docs: list[tuple[str, str, str]], settings: DedupSettings) -> list[np.ndarray]:
    """Signatures of (code, entry, input) documents; the part that runs in the workers."""
    return [signature(doc, settings) for doc in docs]


def resolve_duplicates(sigs: list[np.ndarray], settings: DedupSettings) -> dict[int, tuple[int, float]]:
    """{position: (position of the kept record it duplicates, estimated similarity)}, in record order."""
    lsh = MinHashLSH(threshold=settings.threshold, num_perm=settings.num_perm)
    hashes = [
        MinHash(num_perm=settings.num_perm, seed=settings.seed, hashvalues=values, scheme=SCHEME) for values in sigs
    ]
    duplicates = {}
    for position, minhash in enumerate(hashes):
        best = None
        for key in lsh.query(minhash):
            kept = int(cast(str, key))
            similarity = minhash.jaccard(hashes[kept])
            if similarity >= settings.threshold and (best is None or kept < best[0]):
                best = (kept, similarity)
        if best is None:
            lsh.insert(str(position), minhash)
        else:
            duplicates[position] = best
    return duplicates


def signature_matrix(docs: list[tuple[str, str, str]], settings: DedupSettings) -> np.ndarray:
    """The signatures of `docs` as one (len(docs), num_perm) array, one row per document."""
    if not docs:
        return np.empty((0, settings.num_perm), dtype=np.uint32)
    return np.stack(signatures(docs, settings))
