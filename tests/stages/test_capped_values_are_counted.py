"""Issue 10, item 9: each trace counts its capped values (`n_capped_values`), and the caps are per job."""

import argparse
import ast
from dataclasses import replace

from hostile_helpers import FAST

from pipeline.kinds.functions import FunctionsKind
from pipeline.kinds.repos import ReposKind
from pipeline.sandbox import make_sandbox
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.trace_functions import ReprLimits, trace_functions

RECORDS = [
    FunctionRecord("whole", "def f(n):\n    xs = list(range(n))\n    return xs\n", "5", "f", "t:1"),
    FunctionRecord("capped", "def f(n):\n    xs = list(range(n))\n    return xs\n", "30", "f", "t:2"),
]


def traced(reprs: ReprLimits) -> dict:
    output = trace_functions(RECORDS, make_sandbox("bwrap"), replace(FAST, reprs=reprs), "capped")
    return {row["source_id"]: row for row in output.rows("traces")}


def test_the_count_column_and_the_per_job_caps():
    default, tight = traced(ReprLimits()), traced(ReprLimits(max_items=3))
    assert default["whole"]["n_capped_values"] == 0 and default["whole"]["events"][-1]["arg"] == "[0, 1, 2, 3, 4]"
    # xs in the locals of the `return xs` line and of the return event, and the return value
    assert default["capped"]["n_capped_values"] == 3
    assert default["capped"]["events"][-1]["arg"].endswith(", 19, …+10]")
    assert tight["whole"]["events"][-1]["arg"] == "[0, 1, 2, …+2]" and tight["whole"]["n_capped_values"] == 3
    assert tight["whole"]["trace_id"] != default["whole"]["trace_id"]
    for row in (*default.values(), *tight.values()):
        for event in row["events"]:
            for _, text in event["locals"]:
                if "…" in text:
                    try:
                        ast.literal_eval(text)
                    except (SyntaxError, ValueError):
                        continue
                    raise AssertionError(f"a capped value parses: {text}")


def test_the_caps_are_options_of_both_kinds_and_in_the_config_hash():
    for kind, required in ((FunctionsKind(), ["--input", "x.jsonl"]), (ReposKind(), ["--manifest", "r.toml"])):
        parser = argparse.ArgumentParser()
        kind.add_arguments(parser)
        _, default = kind.configure(parser.parse_args(required))
        _, tight = kind.configure(
            parser.parse_args(required + ["--max-repr-chars", "80", "--max-repr-items", "5", "--max-repr-depth", "2"])
        )
        assert default.trace.reprs == ReprLimits()
        assert tight.trace.reprs == ReprLimits(80, 5, 2, "structural")
        assert tight.hash() != default.hash()
