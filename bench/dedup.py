"""Dedup throughput: tracegen's MinHash LSH vs datasketch used with its defaults, on the same documents.

    .venv/bin/python bench/dedup.py [--docs 10000] [--repeat 3]

Documents are (code, entry, input) built from examples/functions.jsonl (see `documents`).

Variants, each timed `--repeat` times side by side (best kept; noise only ever adds time):
  * tracegen — `pipeline.stages.dedup.signatures` (normalise, shingle, `MinHash.update_batch`, pinned seed and
    scheme) then `resolve_duplicates` (MinHashLSH at the configured threshold, first of a group kept);
  * datasketch defaults — `MinHash()` and `update` once per shingle, the way its README shows, on the
    same shingle sets (tracegen's normalisation, timed separately and added), then the same LSH resolution
    (the signatures come out bit-identical, so the resolution is the same work and is timed once per round
    for each and the best kept).
One core, in this process: in a job the signatures run in Ray tasks (one per 512 documents) and only the
resolution runs on the driver. Prints a table and whether both variants drop the same documents.
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import datasketch
import numpy as np
from datasketch import MinHash, MinHashLSH

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.stages.dedup import DedupSettings, resolve_duplicates, shingles, signature  # noqa: E402


def documents(count: int) -> list[tuple[str, str, str]]:
    """`count` documents cycling over the examples, pass by pass: pass 0 the examples as they are, then in
    turn copies with every identifier renamed (duplicates after normalisation), copies with one statement
    added (near duplicates) and copies called with another input (distinct: the input is in every shingle)."""
    with open(ROOT / "examples" / "functions.jsonl", encoding="utf-8") as handle:
        examples = [json.loads(line) for line in handle if line.strip()]
    docs = []
    for i in range(count):
        example = examples[i % len(examples)]
        code, entry, value = example["code"], example.get("entry", "f"), example["input"]
        round_, kind = divmod(i // len(examples), 3)
        if i < len(examples):
            pass
        elif kind == 0:
            code = rename(code, round_)
        elif kind == 1:
            head, _, body = code.partition("\n")
            indent = body[: len(body) - len(body.lstrip())] or "    "
            code = f"{head}\n{indent}_unused_{round_} = {round_}\n{body}"
        else:
            value = f"{value}, {round_ + 1}" if value else str(round_ + 1)
        docs.append((code, entry, value))
    return docs


def rename(code: str, suffix: int) -> str:
    """Every identifier that normalisation renumbers gets a suffix: same normalised tokens."""
    import io
    import tokenize

    from pipeline.stages.dedup import _KEPT_NAMES

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        return tokenize.untokenize(
            (t.type, f"{t.string}_r{suffix}" if t.type == tokenize.NAME and t.string not in _KEPT_NAMES else t.string)
            for t in tokens
        )
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code


def datasketch_defaults(shingle_sets: list[set[str]]) -> list[np.ndarray]:
    """MinHash() with its defaults, `update` per shingle."""
    out = []
    for shingle_set in shingle_sets:
        minhash = MinHash()
        for shingle in shingle_set:
            minhash.update(shingle.encode())
        out.append(minhash.hashvalues)
    return out


def resolve_with_defaults(sigs: list[np.ndarray], threshold: float) -> dict[int, int]:
    """The same first-of-group resolution over an index of default MinHashes."""
    lsh = MinHashLSH(threshold=threshold)
    hashes = [MinHash(hashvalues=values, scheme="affine32") for values in sigs]
    duplicates = {}
    for position, minhash in enumerate(hashes):
        kept = [int(key) for key in lsh.query(minhash) if minhash.jaccard(hashes[int(key)]) >= threshold]
        if kept:
            duplicates[position] = min(kept)
        else:
            lsh.insert(str(position), minhash)
    return duplicates


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000, help="documents to deduplicate")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best time of each phase is kept")
    args = parser.parse_args()

    settings = DedupSettings()
    docs = documents(args.docs)
    best = {}

    def keep(name, seconds):
        best[name] = min(best.get(name, float("inf")), seconds)

    for _ in range(args.repeat):
        seconds, shingle_sets = timed(lambda: [shingles(*doc, settings.shingle) for doc in docs])
        keep("shingle", seconds)
        seconds, ours = timed(lambda: [signature(doc, settings) for doc in docs])
        keep("ours_signatures", seconds)
        seconds, theirs = timed(datasketch_defaults, shingle_sets)
        keep("theirs_minhash", seconds)
        seconds, ours_dups = timed(resolve_duplicates, ours, settings)
        keep("resolve", seconds)
        seconds, theirs_dups = timed(resolve_with_defaults, theirs, settings.threshold)
        keep("resolve", seconds)

    n = len(docs)
    identical = all((a == b).all() for a, b in zip(ours, theirs, strict=True))
    ours_minhash = best["ours_signatures"] - best["shingle"]
    ours_total = best["ours_signatures"] + best["resolve"]
    theirs_total = best["shingle"] + best["theirs_minhash"] + best["resolve"]
    mean_shingles = sum(len(s) for s in shingle_sets) / n
    rows = [
        ("normalise + shingle (tracegen's; the same sets for both)", best["shingle"], None),
        ("MinHash: datasketch `MinHash()` + `update` per shingle", best["theirs_minhash"], None),
        ("MinHash: tracegen `update_batch` (affine32, seed 1)", ours_minhash, best["theirs_minhash"] / ours_minhash),
        ("LSH resolve (MinHashLSH, first of a group kept; the same for both)", best["resolve"], None),
        ("**end to end: datasketch defaults**", theirs_total, 1.0),
        ("**end to end: tracegen**", ours_total, theirs_total / ours_total),
    ]
    print(
        f"{n} documents, {mean_shingles:.0f} shingles each on average; num_perm {settings.num_perm}, "
        f"threshold {settings.threshold}, shingle {settings.shingle}; datasketch {datasketch.__version__}, "
        f"numpy {np.__version__}, python {platform.python_version()}; one core, best of {args.repeat}"
    )
    print("| phase | seconds | µs/doc | docs/s | speed-up |\n|---|---|---|---|---|")
    for name, seconds, ratio in rows:
        print(
            f"| {name} | {seconds:.3f} | {seconds / n * 1e6:,.0f} | {n / seconds:,.0f} | "
            f"{'' if ratio is None else f'{ratio:.2f}x'} |"
        )
    same = set(ours_dups) == set(theirs_dups)
    print(
        f"signatures bit-identical to datasketch defaults: {identical}; duplicates dropped: tracegen "
        f"{len(ours_dups)}, datasketch defaults {len(theirs_dups)}, same documents: {same}"
    )


if __name__ == "__main__":
    main()
