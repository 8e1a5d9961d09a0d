"""The decontamination matcher: near-copies of benchmark items match the item they copy, by the rule the module
documents, and unrelated functions match nothing (the false-positive rate on a generated set)."""

import json
from pathlib import Path

import pytest
from decontam_fixtures import (
    EMBEDDED,
    ITEMS,
    PLANTED,
    PLANTED_ITEM,
    SAME_IO,
    TRACED_IO,
    unrelated_functions,
    write_jsonl,
)

from pipeline.engine.config import settings_dict
from pipeline.kinds.functions import FunctionsConfig
from pipeline.stages.code_tokens import NORMALISATION
from pipeline.stages.decontaminate import BenchmarkFile, Decontaminator, TraceCleaner, go_tokens, io_key, returned

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


def test_a_renamed_copy_whose_local_shares_a_methods_name_matches(tmp_path):
    """issue 38: with every identifier numbered, `index = s.index(x)` renamed to `k = s.index(x)` numbered
    otherwise than its item, and the copy passed."""
    item = {"id": "rot", "code": "def f(s, x):\n    index = s.index(x)\n    return s[index:] + s[:index]\n"}
    matcher = Decontaminator.from_files(
        [write_jsonl(tmp_path / "b.jsonl", [dict(item, input="'ab', 'b'", output="'ba'")])]
    )
    copy = "def f(text, ch):\n    k = text.index(ch)\n    return text[k:] + text[:k]\n"
    found = matcher.match(copy, "'cd', 'd'")
    assert found is not None and (found.item_id, found.rule, found.score) == ("rot", "minhash", 1.0)


def test_functions_of_an_items_shape_that_call_other_methods_do_not_match(tmp_path):
    """issue 38: `xs.append(v)` and `xs.extend(v)`, `return True` and `return bool(t)` were the same tokens."""
    code = "def f(xs, v):\n    xs.append(v)\n    return True\n"
    matcher = Decontaminator.from_files(
        [write_jsonl(tmp_path / "b.jsonl", [{"id": "a", "code": code, "input": "[], 1", "output": "True"}])]
    )
    assert matcher.match(code.replace("append", "extend"), "[], 1") is None
    assert matcher.match(code.replace("True", "bool(xs)"), "[], 1") is None
    assert matcher.match(code.replace("xs", "ys").replace("v)", "w)").replace("(v", "(w"), "[], 2") is not None


def test_a_trace_whose_call_has_an_items_input_and_returns_its_output_matches_by_io(decontaminator):
    """After tracing (`TraceCleaner`): the entry call's input and its return event's value, compared as values;
    with by_code=False the code rules are not asked (trace-functions asked them before tracing)."""
    events = [
        {"event": "call", "depth": 0, "arg": None},
        {"event": "return", "depth": 1, "arg": "'<9>'"},
        {"event": "return", "depth": 0, "arg": "'<3>'"},
    ]
    trace = {"trace_id": "t1", "source_id": TRACED_IO["id"], "code": TRACED_IO["code"], "input": "'wxyz',2"}
    trace.update(exit="normal", events=events)
    assert returned(trace) == "'<3>'" and returned(dict(trace, exit="error")) is None
    cleaner = TraceCleaner(decontaminator, "u0", "decontaminate_traces", by_code=False)
    other = dict(trace, trace_id="t2", input="'wxyz', 3")
    kept = cleaner.drop([trace, other], cleaner.matches([trace, other]), "traces", "trace_id")
    assert kept == [other]
    assert [(r["dropped_id"], r["item_id"], r["rule"], r["table"]) for r in cleaner.rows] == [
        ("t1", "bench_1", "io", "traces")
    ]
    assert cleaner.output().counters["decontaminate_traces"].dropped == {"contaminated_io": 1}
    planted = dict(trace, trace_id="t3", code=PLANTED[0]["code"], input="[]", events=[])
    assert TraceCleaner(decontaminator, "u0", by_code=False).matches([planted]) == {}
    assert TraceCleaner(decontaminator, "u0").matches([planted])["t3"].rule == "minhash"


def test_io_values_compare_as_literals():
    assert io_key("'a', (1,2)", '"<3>"') == io_key('"a" , (1, 2)', "'<3>'")
    assert io_key("x=1", "[1]") == io_key("x = 1", "[ 1 ]") != io_key("x=2", "[1]")


def test_a_go_program_matches_by_a_shared_13_token_run_of_an_items_tokens(decontaminator):
    """Go sources are compared by the ngram rule over their tokens, names as written (comments dropped): a
    program that carries a 13-token stretch of an item's code matches it; Go code of its own does not."""
    assert go_tokens('x := a[i] // c\n/* d */ s := `r`+"q\\""') == [
        "x",
        ":=",
        "a",
        "[",
        "i",
        "]",
        "s",
        ":=",
        "`r`",
        "+",
        '"q\\""',
    ]
    own = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfor i := 0; i < 3; i++ {\n\t\tfmt.Println(i * 2)\n\t}\n}\n'
    planted = (
        "package main\n\nfunc f() {\n\tbuilt += word[len(word) - 1 - i + half]\n"
        "\treturn built.center(len(word) + 2, '*')\n}\n"
    )
    programs = [
        {"program_id": "p/copy", "files": [{"path": "main.go", "text": planted}]},
        {"program_id": "p/own", "files": [{"path": "main.go", "text": own}, {"path": "go.mod", "text": "module p"}]},
    ]
    found = decontaminator.match_go(planted)
    assert found is not None and (found.item_id, found.rule) == ("bench_2", "ngram")
    assert decontaminator.match_go(own) is None
    cleaner = TraceCleaner(decontaminator, "pack-go-0")
    assert cleaner.drop_programs(programs) == {"p/copy"}
    assert [(r["table"], r["dropped_id"], r["item_id"]) for r in cleaner.rows] == [("go_programs", "p/copy", "bench_2")]


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
        "normalisation": NORMALISATION,
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
