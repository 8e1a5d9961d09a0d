"""The decontamination matcher: near-copies of benchmark items match the item they copy, by the rule the module
documents, and unrelated functions match nothing (the false-positive rate on a generated set)."""

import json
from pathlib import Path

import pytest
from decontam_fixtures import EMBEDDED, ITEMS, PLANTED, PLANTED_ITEM, SAME_IO, unrelated_functions, write_jsonl

from pipeline.engine.config import settings_dict
from pipeline.kinds.functions import FunctionsConfig
from pipeline.stages.decontaminate import BenchmarkFile, Decontaminator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def decontaminator(tmp_path_factory) -> Decontaminator:
    return Decontaminator.from_files([write_jsonl(tmp_path_factory.mktemp("bench") / "bench.jsonl", ITEMS)])


def test_planted_near_copies_match_the_item_they_copy(decontaminator):
    for record in PLANTED:
        found = decontaminator.match(record["code"], record["input"])
        assert found is not None and found.item_id == PLANTED_ITEM[record["id"]], record["id"]
        assert found.rule == "minhash" and found.score >= 0.8
        assert found.benchmark == decontaminator.benchmarks[0]


def test_an_item_inside_a_longer_function_matches_by_a_shared_13_token_run(decontaminator):
    found = decontaminator.match(EMBEDDED["code"], EMBEDDED["input"])
    assert found is not None and (found.item_id, found.rule) == ("bench_2", "ngram")
    assert 0.0 < found.score <= 1.0


def test_a_record_with_an_items_input_and_output_matches_by_io(decontaminator):
    found = decontaminator.match(SAME_IO["code"], SAME_IO["input"], SAME_IO["output"])
    assert found is not None and (found.item_id, found.rule, found.score) == ("bench_1", "io", 1.0)
    assert decontaminator.match(SAME_IO["code"], SAME_IO["input"], "'[5]'") is None
    assert decontaminator.match(SAME_IO["code"], SAME_IO["input"]) is None  # no output: no io rule


def test_no_false_positive_on_unrelated_functions(decontaminator):
    """600 generated functions of six shapes and the bundled examples (119 real small functions): none matches."""
    examples = [json.loads(line) for line in (ROOT / "examples" / "functions.jsonl").read_text().splitlines()]
    unrelated = unrelated_functions(600) + examples
    matched = [r["id"] for r in unrelated if decontaminator.match(r["code"], r["input"]) is not None]
    assert matched == [], f"false-positive rate {len(matched) / len(unrelated):.3f}: {matched[:5]}"


def test_the_benchmark_set_is_in_the_config_hash_and_nothing_else_is(decontaminator, tmp_path):
    """The files' paths and sha256s and the rules' parameters are hashed (another set re-runs); the index is not;
    without benchmarks the config hashes as it did before the option existed."""
    plain = FunctionsConfig()
    cleaned = FunctionsConfig(decontaminate=decontaminator)
    assert "decontaminate" not in settings_dict(plain)
    recorded = settings_dict(cleaned)["decontaminate"]
    assert recorded == {
        "benchmarks": [{"path": decontaminator.benchmarks[0].path, "sha256": decontaminator.benchmarks[0].sha256}],
        "threshold": 0.8,
        "ngram": 13,
    }
    other = Decontaminator.from_files([write_jsonl(tmp_path / "other.jsonl", ITEMS[:2])])
    hashes = {plain.hash(), cleaned.hash(), FunctionsConfig(decontaminate=other).hash()}
    assert len(hashes) == 3
    assert FunctionsConfig(decontaminate=Decontaminator(decontaminator.benchmarks)).hash() == cleaned.hash()


def test_a_bad_benchmark_file_or_threshold_is_refused(tmp_path):
    with pytest.raises(ValueError, match="output"):
        Decontaminator.from_files([write_jsonl(tmp_path / "b.jsonl", [dict(ITEMS[0], output=None)])])
    with pytest.raises(ValueError, match="--decontaminate-threshold"):
        Decontaminator((BenchmarkFile("b", "0"),), threshold=1.5)
    assert not Decontaminator().enabled and Decontaminator().match(ITEMS[0]["code"]) is None
