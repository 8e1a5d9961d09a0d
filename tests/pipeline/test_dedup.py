"""MinHash LSH dedup: near-duplicates collapse, distinct functions survive, workers do not matter."""

import json

import polars as pl

from pipeline.dedup import DedupSettings, normalised_tokens, resolve_duplicates, signatures
from pipeline.functions_job import find_duplicates, trace_functions_job
from pipeline.sources.functions import FunctionRecord

SETTINGS = DedupSettings()

ORIGINAL = "def f(xs):\n    total = 0\n    for x in xs:\n        if x % 2:\n            total += x * x\n    return total\n"
RENAMED = "def f(values):\n    acc = 0\n    for v in values:\n        if v % 2:\n            acc += v * v\n    return acc\n"
REFORMATTED = ("def f( xs ) :\n    # odd squares\n    total=0\n\n    for x in xs :\n"
               "        if x%2 :\n            total+=x*x\n    return total")
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


def test_the_same_function_with_another_input_is_kept():
    docs = [(ORIGINAL, "f", "[1, 2]"), (ORIGINAL, "f", "[1,2]"), (ORIGINAL, "f", "[3, 4]")]
    duplicates = resolve_duplicates(signatures(docs, SETTINGS), SETTINGS)
    assert set(duplicates) == {1}


def test_the_result_does_not_depend_on_how_signatures_are_split_across_workers(example_records):
    docs = [(r["code"], r.get("entry", "f"), r["input"]) for r in example_records]
    docs += [(RENAMED, "f", "[1, 2, 3]"), (ORIGINAL, "f", "[1, 2, 3]")]
    whole = signatures(docs, SETTINGS)
    split = [sig for start in range(0, len(docs), 7) for sig in signatures(docs[start:start + 7], SETTINGS)]
    assert all((a == b).all() for a, b in zip(whole, split))
    assert resolve_duplicates(whole, SETTINGS) == resolve_duplicates(split, SETTINGS)


def test_the_job_drops_duplicates_before_tracing_and_records_them(tmp_path, ray_local):
    lines = [{"id": "orig", "code": ORIGINAL, "input": "[1, 2, 3]"},
             {"id": "renamed", "code": RENAMED, "input": "[1, 2, 3]"},
             {"id": "distinct", "code": DISTINCT, "input": "[1, 2, 3]"}]
    path = tmp_path / "dups.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    from pipeline.config import JobConfig
    manifest = trace_functions_job(str(path), str(tmp_path / "out"), JobConfig())
    traces = pl.read_parquet(f"{tmp_path}/out/traces/*.parquet")
    assert sorted(traces["source_id"]) == ["distinct", "orig"]
    dups = pl.read_parquet(f"{tmp_path}/out/duplicates/*.parquet").to_dicts()
    assert [(d["source_id"], d["duplicate_of"]) for d in dups] == [("renamed", "orig")]
    assert manifest["stats"]["dedup"]["dropped"] == {"near_duplicate": 1}
    assert manifest["stats"]["trace"]["in"] == 2  # the duplicate cost no tracing


def test_many_small_tasks_or_one_big_task_keep_the_same_records(example_records, ray_local, monkeypatch):
    import pipeline.functions_job as job

    records = [FunctionRecord(r["id"], r["code"], r["input"], r.get("entry", "f"), "x") for r in example_records]
    records = [record(998, ORIGINAL)] + records + [record(999, RENAMED.replace("values", "items"))]
    monkeypatch.setattr(job, "DEDUP_BATCH", 7)
    kept_many, rows_many, _ = find_duplicates(records, SETTINGS)
    monkeypatch.setattr(job, "DEDUP_BATCH", 10_000)
    kept_one, rows_one, _ = find_duplicates(records, SETTINGS)
    assert rows_many == rows_one and [r["source_id"] for r in rows_one] == ["r999"]
    assert [r.id for r in kept_many] == [r.id for r in kept_one]
