"""`tracegen ablate` end to end on a tiny traced corpus: two variants made from the same traces, trained with one seed
and one token budget, scored on the same held-out cuts, in one table and one plot; run again, it resumes."""

import json
import os

import pytest

from pipeline.cli import main
from pipeline.engine.job import run_job
from pipeline.format.split import is_heldout
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind

HOLDOUT = 0.3
CODES = [
    "def f(x):\n    y = x + {k}\n    return y * 2\n",
    "def f(n):\n    total = 0\n    while n > {k}:\n        total += n\n        n -= 1\n    return total\n",
    "def f(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best + {k}:\n            best = x\n"
    "    return best\n",
]
INPUTS = ["4", "5", "[3, 9, 2]"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory, ray_local) -> str:
    records = [
        {"id": f"r{k}_{i}", "code": code.format(k=k), "input": INPUTS[i]}
        for k in range(4)
        for i, code in enumerate(CODES)
    ]
    held = [record for record in records if is_heldout(record["id"], HOLDOUT)]
    assert 0 < len(held) < len(records)  # some sources are held out, some trained on
    corpus = tmp_path_factory.mktemp("ablate-corpus") / "functions.jsonl"
    corpus.write_text("".join(json.dumps(record) + "\n" for record in records))
    out = str(tmp_path_factory.mktemp("ablate-traces") / "data")
    run_job(FunctionsKind(), str(corpus), FunctionsConfig(sandbox="process"), out)  # records written for this test
    return out


def ablate(traces: str, out: str, *extra: str) -> int:
    return main(
        ["ablate", "--traces", traces, "--out", out, "--variant", "full=--full-locals", "--holdout", str(HOLDOUT)]
        + ["--tokens", str(6 * 4 * 1024), "--seq-len", "1024", "--global-batch-size", "4", "--warmup-steps", "1"]
        + ["--layers", "1", "--width", "64", "--heads", "2"]  # the mechanics, not the model: the smallest one
        + ["--eval-trajectories", "8", "--curve-points", "2", "--curve-cuts", "10", *extra]
    )


def test_two_variants_are_trained_alike_and_compared_on_the_same_cuts(traces, tmp_path, capsys):
    out = str(tmp_path / "ablation")
    assert ablate(traces, out) == 0
    printed = capsys.readouterr()
    assert "| base | (defaults) |" in printed.out and "| full | `--full-locals` |" in printed.out
    for line in ("ablate: variant 2 of 2, full", "pretrain: step 6 of 6", "evaluate: cuts "):  # its progress
        assert f"tracegen: {line}" in printed.err
    state = json.loads(open(os.path.join(out, "ablation.json")).read())
    comparison = state["comparison"]
    base, full = comparison["variants"]
    assert base["tokens"] == full["tokens"] == 6 * 4 * 1024  # one token budget: 6 steps of 4 x 1024
    for row in (base, full):
        results = json.loads(open(os.path.join(out, "results", f"{row['name']}.json")).read())
        assert results["cuts_skipped"] == 0 and results["split"] == "heldout"
        assert row["own_cuts"] == comparison["common_cuts"] > 0  # every prompt fits: exactly the same cuts
        with open(os.path.join(row["run"], "metrics.jsonl")) as handle:
            records = [json.loads(line) for line in handle]
        assert [r["step"] for r in records if "eval" in r] == [3, 6]  # the learning curve's points
    table = open(os.path.join(out, "ablation.md")).read()
    for row in ("| base |", "| full |", "| *copy* |", "| *next_line* |", "| *oracle_structure* |"):
        assert row in table
    assert os.path.getsize(os.path.join(out, "curves.png")) > 0

    runs = {name: os.path.getmtime(os.path.join(out, "runs", name, "metrics.jsonl")) for name in ("base", "full")}
    assert ablate(traces, out) == 0  # resumed: nothing is trained or scored again
    assert {name: os.path.getmtime(os.path.join(out, "runs", name, "metrics.jsonl")) for name in runs} == runs
    again = json.loads(open(os.path.join(out, "ablation.json")).read())["comparison"]
    assert again == comparison

    assert ablate(traces, out, "--seed", "1") == 2  # another ablation: refused, the directory named
    assert "is an ablation of other settings" in capsys.readouterr().err
