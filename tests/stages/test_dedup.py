"""MinHash LSH dedup: near-duplicates collapse, distinct functions survive, how signatures are split does not
matter (the job's dedup before tracing: tests/kinds/test_functions.py)."""

from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.code_tokens import normalised_tokens
from pipeline.stages.dedup import DedupSettings, resolve_duplicates, signatures

SETTINGS = DedupSettings()

ORIGINAL = (
    "def f(xs):\n    total = 0\n    for x in xs:\n        if x % 2:\n            total += x * x\n    return total\n"
)
RENAMED = (
    "def f(values):\n    acc = 0\n    for v in values:\n        if v % 2:\n            acc += v * v\n    return acc\n"
)
REFORMATTED = (
    "def f( xs ) :\n    # odd squares\n    total=0\n\n    for x in xs :\n"
    "        if x%2 :\n            total+=x*x\n    return total"
)
DISTINCT = "def f(xs):\n    seen = set()\n    return [x for x in xs if not (x in seen or seen.add(x))]\n"


def record(i, code, input_text="[1, 2, 3]"):
    return FunctionRecord(f"r{i}", code, input_text, "f", f"mem:{i}")


def test_renaming_and_reformatting_do_not_change_the_normalised_tokens():
    assert normalised_tokens(ORIGINAL) == normalised_tokens(RENAMED) == normalised_tokens(REFORMATTED)


def test_near_duplicates_collapse_to_the_first_and_distinct_ones_survive():
    records = [record(0, ORIGINAL), record(1, DISTINCT), record(2, RENAMED), record(3, REFORMATTED)]
    docs = [(r.code, r.entry, r.input) for r in records]
    duplicates = resolve_duplicates(signatures(docs, SETTINGS), SETTINGS)
    assert {position: kept for position, (kept, _) in duplicates.items()} == {2: 0, 3: 0}


def test_programs_that_differ_in_a_called_method_are_kept_and_renamed_copies_merge():
    """The normalisation keeps attributes and methods as written (issue 38: numbered, `append` and `extend` were
    one token and the second program was dropped as the first's duplicate), and numbers a local that shares its
    name with a method (`index = s.index(x)`) apart from it, so its renamed copy is the same tokens."""
    body = "def f(xs, v):\n    out = list(xs)\n    out.{}(v)\n    out.sort()\n    return out[0], len(out)\n"
    shared = "def f(s, x):\n    index = s.index(x)\n    return s[index:] + s[:index]\n"
    renamed = "def f(text, ch):\n    k = text.index(ch)\n    return text[k:] + text[:k]\n"
    docs = [(body.format("append"), "f", "[3], [1]"), (body.format("extend"), "f", "[3], [1]")]
    docs += [(shared, "f", "'abc', 'b'"), (renamed, "f", "'abc', 'b'")]
    duplicates = resolve_duplicates(signatures(docs, SETTINGS), SETTINGS)
    assert {position: kept for position, (kept, _) in duplicates.items()} == {3: 2}


def test_the_same_function_with_another_input_is_kept():
    docs = [(ORIGINAL, "f", "[1, 2]"), (ORIGINAL, "f", "[1,2]"), (ORIGINAL, "f", "[3, 4]")]
    duplicates = resolve_duplicates(signatures(docs, SETTINGS), SETTINGS)
    assert set(duplicates) == {1}


def test_the_result_does_not_depend_on_how_signatures_are_split_across_workers(example_records):
    docs = [(r["code"], r.get("entry", "f"), r["input"]) for r in example_records]
    docs += [(RENAMED, "f", "[1, 2, 3]"), (ORIGINAL, "f", "[1, 2, 3]")]
    whole = signatures(docs, SETTINGS)
    split = [sig for start in range(0, len(docs), 7) for sig in signatures(docs[start : start + 7], SETTINGS)]
    assert all((a == b).all() for a, b in zip(whole, split, strict=True))
    assert resolve_duplicates(whole, SETTINGS) == resolve_duplicates(split, SETTINGS)
