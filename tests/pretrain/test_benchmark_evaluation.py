"""`tracegen evaluate --benchmark`: a model trained to memorise a few functions scores 1.0 on their output and
input prediction and an untrained one 0.0; a predicted input that exits the process, loops forever or
allocates without bound fails its item and the evaluation goes on."""

import json

import pytest
from training_helpers import train, train_untrained

from pipeline.cli import main
from pipeline.debugger.policy import PolicyConfig
from pipeline.engine.job import run_job
from pipeline.evaluation.benchmark import Decoding, benchmark_table, evaluate_benchmark, pass_at_k
from pipeline.evaluation.benchmark_cwm import entry_return_value
from pipeline.evaluation.benchmark_items import call_input, execute, same_value, trace_items
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.sandbox import make_sandbox
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.pack.packing import PackSettings
from pipeline.stages.trace_functions import TraceSettings
from pipeline.stages.trajectories import SamplingSettings

ITEMS = [
    {"id": "add_then_double", "code": "def f(x):\n    y = x + 3\n    return y * 2\n", "input": "4", "output": "14"},
    {
        "id": "count_down",
        "code": "def f(n):\n    while n > 0:\n        n -= 2\n    return n\n",
        "input": "5",
        "output": "-1",
    },
    {
        "id": "shout",
        "code": "def shout(s, times):\n    return (s.upper() + '!') * times\n",
        "input": "'hi', 2",
        "output": "'HI!HI!'",
        "entry": "shout",
    },
]
# Training shows each item exactly what the benchmark asks: step_return from the entry call, inv_step_call from
# the entry's return.
ASKED = PolicyConfig(
    forward_mixture=((1.0, (("step_return", 1.0),)),), inverse_mixture=((1.0, (("inv_step_call", 1.0),)),)
)


@pytest.fixture(scope="module")
def benchmark_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("benchmark") / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    return str(path)


@pytest.fixture(scope="module")
def memorised_run(benchmark_file, tmp_path_factory, ray_local) -> str:
    """A tiny model trained on the benchmark items' own trajectories until it knows them."""
    base = tmp_path_factory.mktemp("benchmark-run")
    config = FunctionsConfig(sandbox="process", sampling=SamplingSettings(per_trace=1, policy=ASKED))
    run_job(FunctionsKind(), benchmark_file, config, str(base / "data"))
    run_job(
        PackKind(),
        str(base / "data"),
        PackConfig(packing=PackSettings(seq_len=256), tokenizer="bytes"),
        str(base / "packed"),
    )
    train(str(base / "packed"), str(base / "run"), 200, warmup_steps=10, weight_decay=0.0, log_every=50)
    return str(base / "run")


def test_a_memorised_model_scores_one_and_an_untrained_one_zero(memorised_run, benchmark_file, tmp_path):
    out = tmp_path / "learned.json"
    learned = evaluate_benchmark(memorised_run, benchmark_file, str(out), sandbox="process", per_item=True)
    assert learned["items"] == 3 and learned["not_scored"] == {}
    assert learned["output"] == {"items": 3, "pass@1": 1.0}
    assert learned["input"] == {"items": 3, "pass@1": 1.0}
    assert [row["input"]["pass"] for row in learned["per_item"]] == [True, True, True]
    assert {row["id"]: row["output"]["predicted"] for row in learned["per_item"]}["shout"] == "'HI!HI!'"
    assert learned["by_trace_length"] == [{"bucket": "0-9", "items": 3, "output": 1.0, "input": 1.0}]
    assert json.loads(out.read_text()) == learned
    table = benchmark_table(learned)
    assert "output (step_return)" in table and "input (inv_step_call)" in table

    untrained_run = train_untrained(memorised_run, str(tmp_path / "untrained"))
    untrained = evaluate_benchmark(
        untrained_run, benchmark_file, str(tmp_path / "untrained.json"), sandbox="process", decoding=Decoding(samples=3)
    )
    assert untrained["output"]["pass@1"] == 0.0 and untrained["input"]["pass@1"] == 0.0
    assert set(untrained["output"]["sampled_pass@k"]) == {"1", "3"}


def test_the_command_prints_the_table_and_refuses_data_with_a_benchmark(
    memorised_run, benchmark_file, tmp_path, capsys
):
    out = tmp_path / "cli.json"
    argv = ["evaluate", "--run", memorised_run, "--benchmark", benchmark_file, "--out", str(out)]
    assert main([*argv, "--sandbox", "process", "--samples", "2", "--temperature", "0.5", "--per-item"]) == 0
    printed = capsys.readouterr().out
    assert "input (inv_step_call)        3    1.000" in printed and "shout: output pass" in printed
    assert json.loads(out.read_text())["decoding"]["samples"] == 2
    with pytest.raises(SystemExit):
        main([*argv, "--data", str(tmp_path)])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main([*argv, "--sandbox", "process", "--samples", "2", "--temperature", "0"]) == 2
    assert "--temperature must be > 0" in capsys.readouterr().err


def test_a_cwm_model_is_scored_from_its_completions_of_the_exported_prompts(benchmark_file, tmp_path, capsys):
    prompts_file, completions_file, out = tmp_path / "prompts.jsonl", tmp_path / "done.jsonl", tmp_path / "r.json"
    cwm = ["evaluate", "--benchmark", benchmark_file, "--dialect", "cwm", "--sandbox", "process"]
    assert main([*cwm, "--out", str(prompts_file)]) == 0
    prompts = [json.loads(line) for line in prompts_file.read_text().splitlines()]
    assert [p["id"] for p in prompts] == [item["id"] for item in ITEMS]
    assert prompts[0]["prompt"].endswith('<|call_sep|>{"x": "4"}<|action_sep|>def f(x):<|frame_sep|>')
    right = (
        '<|line_sep|>{"x": "4"}<|action_sep|>    y = x + 3<|frame_sep|>'
        '<|line_sep|>{"x": "4", "y": "7"}<|action_sep|>    return y * 2<|frame_sep|>'
        '<|return_sep|><|action_sep|>    return y * 2<|arg_sep|>"14"<|frame_sep|><|end_of_text|>'
    )
    wrong = '<|return_sep|><|action_sep|>    return n<|arg_sep|>"3"<|frame_sep|>'
    lines = [{"id": "add_then_double", "completion": right}, {"id": "count_down", "completion": wrong}]
    completions_file.write_text("".join(json.dumps(line) + "\n" for line in lines))  # shout: no completion
    assert main([*cwm, "--completions", str(completions_file), "--out", str(out), "--per-item"]) == 0
    results = json.loads(out.read_text())
    assert results["output"] == {"items": 3, "pass@1": pytest.approx(1 / 3)} and results["input"] is None
    assert [row["output"]["predicted"] for row in results["per_item"]] == ["14", "3", None]
    assert "cwm completions" in capsys.readouterr().out
    assert main([*cwm, "--completions", str(completions_file), "--out", str(out), "--run", "run"]) == 2


def test_the_entry_return_frame_of_a_cwm_completion_is_found_past_nested_calls():
    nested = (
        '<|line_sep|>{"n": "1"}<|action_sep|>    f(n - 1)<|frame_sep|><|call_sep|>{"n": "0"}<|action_sep|>def f(n):'
        '<|frame_sep|><|return_sep|><|action_sep|>    return n<|arg_sep|>"0"<|frame_sep|>'
        '<|return_sep|><|action_sep|>    return n<|arg_sep|>"1"<|frame_sep|><|end_of_text|>'
    )
    assert entry_return_value(nested) == "1"
    assert entry_return_value(nested.split("<|return_sep|>")[0]) is None
    assert entry_return_value("<|line_sep|>not json<|action_sep|>x<|frame_sep|>") is None


def test_a_hostile_or_endless_predicted_input_fails_its_item_and_the_rest_still_run():
    item = FunctionRecord("ident", "def f(x):\n    return x\n", "1", "f", "test:1", "[1, 2]")
    predictions = [
        "__import__('os')._exit(3)",
        "(lambda: [None for _ in iter(int, 1)])()",  # never ends
        "[0] * (1 << 40)",  # allocates without bound
        "(lambda: [n for n in iter(int, 1)])() + 1 / 0",
        "[1, 2]",
        "[1, 3]",
        "",  # no argument: f() raises TypeError
    ]
    settings = TraceSettings(max_seconds=1.0, record_timeout_s=3.0)
    results = execute([(item, text) for text in predictions], make_sandbox("process"), settings)
    assert [passed for passed, _ in results] == [False, False, False, False, True, False, False]


def test_items_give_prompts_cut_from_their_traces_or_say_why_not():
    items = (
        FunctionRecord("deeper", "def f(n):\n    if n > 0:\n        f(n - 1)\n    return n\n", "1", "f", "t:1", "1"),
        FunctionRecord("raises", "def f(x):\n    return 1 / x\n", "0", "f", "t:2", "0"),
    )
    deeper, raises = trace_items(items, make_sandbox("process"), TraceSettings())
    assert deeper.output is not None and deeper.input is not None
    assert deeper.output.endswith('<|call_sep|>{"n": "1"}<|action_sep|>def f(n):<|frame_sep|><|step_return|>')
    assert deeper.input.endswith('<|action_sep|>    return n<|arg_sep|>"1"<|frame_sep|><|inv_step_call|>')
    assert deeper.trace_length == 7  # if, the call f(0) and its 4 events, if's sibling: 7 between call and return
    assert not deeper.route_applies  # `return n` is first reached inside f(0): its step_return is not the entry's
    assert raises.problem is not None and "did not return (exit error)" in raises.problem


def test_predicted_arguments_bind_by_position_then_by_name():
    code = "def f(a, /, b, *rest, c, **more):\n    return a\n"
    arguments = {"a": "1", "b": "[2]", "rest": "(3, 4)", "c": "'x'", "more": "{'k': 5}", "stray": "0"}
    text = call_input(code, "f", arguments)
    assert eval(f"(lambda *a, **k: (a, k))({text}\n)") == ((1, [2], 3, 4), {"c": "x", "k": 5})
    assert eval(f"dict({call_input('g = len', 'g', {'x': '1'})})") == {"x": 1}


def test_answers_compare_as_literals_and_pass_at_k_is_unbiased():
    assert same_value("'a'", '"a"') and same_value("[1, (2,)]", "[1, (2,)]")
    assert not same_value("f(1)", "f(1)") and not same_value(None, "1") and not same_value("1", "2")
    assert pass_at_k(5, 0, 1) == 0.0 and pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25) and pass_at_k(4, 1, 2) == pytest.approx(0.5)
