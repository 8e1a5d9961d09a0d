"""Near-duplicate function records, found with MinHash LSH (datasketch) before anything is traced.

Normalisation (what makes two records "the same function"): pipeline/stages/code_tokens.py, scope-aware:
  * the names the code binds (parameters, locals, comprehension variables, nested functions...) are numbered per
    scope, so renaming them does not matter; attributes, methods, builtins, imports and globals are kept as
    written, so two programs that call different methods stay apart; literals and operators are kept;
  * comments, docstrings and formatting are dropped (the code is printed by `ast.unparse`);
  * every shingle is prefixed with the entry name and the input's tokens (formatting dropped): the same
    function called with another input shares no shingle with it (its trace differs), so it is kept.
`DedupSettings.normalisation` is that normalisation's version (hashed: another version is another config).
Shingles are windows of `shingle` consecutive normalised tokens. Signatures are MinHash with `num_perm`
permutations and a fixed seed; the LSH index uses `threshold` (estimated Jaccard similarity) and a
candidate is confirmed only when its estimated similarity reaches the threshold.
The result is defined by `resolve_duplicates`, the serial resolution: records in order, each queried against
an index of the records kept so far, a candidate confirmed when its estimated similarity reaches the
threshold, the first (lowest-position) confirmed one named; a record with none is kept and indexed.

From `DISTRIBUTED_DEDUP_FROM` records on (20,000; pipeline/kinds/functions.py) the same result is computed by
tasks that never hold every signature (pipeline/stages/dedup_distributed.py).
"""

from dataclasses import dataclass
from typing import cast

import numpy as np
from datasketch import MinHash, MinHashLSH

from pipeline.stages.code_tokens import NORMALISATION, normalised_tokens, written_tokens

SCHEME = "affine32"  # pinned: signatures must stay comparable across datasketch versions


@dataclass(frozen=True)
class DedupSettings:
    """MinHash LSH parameters; `enabled=False` keeps every record."""

    enabled: bool = True
    num_perm: int = 128
    threshold: float = 0.8
    shingle: int = 5
    seed: int = 1
    normalisation: int = NORMALISATION  # pipeline/stages/code_tokens.py: what "the same tokens" means

    def __post_init__(self):
        if not 16 <= self.num_perm <= 1024:
            raise ValueError(f"dedup num_perm must be in 16..1024, got {self.num_perm}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"dedup threshold must be in (0, 1], got {self.threshold}")
        if self.shingle < 1:
            raise ValueError(f"dedup shingle must be >= 1, got {self.shingle}")
        if self.normalisation != NORMALISATION:
            raise ValueError(
                f"dedup normalisation {self.normalisation} is not this version's ({NORMALISATION}): a dataset made "
                "with another one is rebuilt (--overwrite), never mixed"
            )


def shingles(tokens: list[str], entry: str, input_text: str, width: int) -> set[str]:
    """Windows of `width` normalised tokens, each keyed by the entry and the input."""
    key = entry + "(" + " ".join(written_tokens(input_text)) + ")|"
    return {key + " ".join(tokens[i : i + width]) for i in range(max(1, len(tokens) - width + 1))}


def signature(doc: tuple[str, str, str], settings: DedupSettings) -> np.ndarray:
    """MinHash hash values of a (code, entry, input) document (deterministic: fixed seed and scheme)."""
    code, entry, input_text = doc
    return token_signature(normalised_tokens(code), entry, input_text, settings)


def token_signature(tokens: list[str], entry: str, input_text: str, settings: DedupSettings) -> np.ndarray:
    """`signature` of code already normalised (its `tokens`)."""
    shingle_set = shingles(tokens, entry, input_text, settings.shingle)
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
