"""`tracegen evaluate --run RUN --benchmark FILE --out RESULTS.json`: CruxEval-style output and input
prediction on a benchmark file (pipeline/sources/benchmark.py), with the run's newest checkpoint.

Prompts and checks: pipeline/evaluation/benchmark_items.py (each item traced in the sandbox, its prompts cut from
the trajectories training sees; answers compared as literals; predicted inputs executed in the sandbox).
Decoding: greedy for pass@1; with `samples` K > 0 also K samples at `temperature` per item and task, scored
with the unbiased pass@k estimator (Chen et al. 2021: 1 - C(n-c, k) / C(n, k), n samples, c correct) for k in
1, 5, 10 up to K and K itself. Every item counts: one whose trace gives no prompt, or whose prompt does not fit in
the model's context, is a failed item (named in `not_scored`). The breakpoint route is scored on the items
where it applies. Items are also split by trace length (events between the entry's call and return), the
paper's horizon analysis, greedy pass@1 per bucket.
"""

import json
import math
import os
from dataclasses import dataclass, field

import torch

from pipeline.debugger.language import FRAME_SEP
from pipeline.evaluation.benchmark_items import (
    STEP_RETURN,
    ItemPrompts,
    call_input,
    execute,
    predicted_arguments,
    returned_value,
    same_value,
    trace_items,
)
from pipeline.model.decoding import Model
from pipeline.model.network import DecodeCache
from pipeline.sandbox import make_sandbox
from pipeline.sources.benchmark import Benchmark, read_benchmark
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.trace_functions import TraceSettings

TASKS = {"output": "output (step_return)", "output_breakpoint": "output (breakpoint)", "input": "input (inv_step_call)"}
HORIZON_EDGES = (10, 30, 100, 300, 1000)  # trace-length buckets: <10, 10-29, ..., >=1000 events
TOO_LONG = "the prompt does not fit in the model's context"


@dataclass
class Attempt:
    """One decoded answer: what it predicts (a value, or the argument text run), whether it passed, and why not."""

    predicted: str | None
    passed: bool = False
    note: str = ""


@dataclass
class Scored:
    """An item's attempts per task (greedy first, then the samples); a task absent: it does not apply."""

    prompts: ItemPrompts
    tasks: dict[str, list[Attempt]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decoding:
    samples: int = 0
    temperature: float = 0.8
    seed: int = 0
    max_new_tokens: int = 256

    def __post_init__(self):
        if type(self.samples) is not int or self.samples < 0:
            raise ValueError(f"--samples must be an int >= 0, got {self.samples!r}")
        if self.samples and not self.temperature > 0:
            raise ValueError(f"--temperature must be > 0 to draw --samples, got {self.temperature!r}")

    def temperatures(self) -> list[float]:
        return [0.0] + [self.temperature] * self.samples


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from n samples of which c are correct."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def continuations(
    model: Model, prompt: str, temperatures: list[float], generator: torch.Generator, max_new_tokens: int
) -> list[str] | None:
    """One predicted state after `prompt` per temperature (0: greedy); None when the prompt does not fit."""
    cache = DecodeCache(model.config.layers)
    if not model.fits(cache, prompt):
        return None
    last = model.prefill(prompt, cache)
    assert last is not None
    return [model.next_state_text(last, cache, max_new_tokens, t, generator) for t in temperatures]


def route_continuations(
    model: Model, prompt: str, temperatures: list[float], generator: torch.Generator, max_new_tokens: int
) -> list[str] | None:
    """The breakpoint route: the line state after `prompt`, then `<|step_return|>` and the state after it,
    both predicted; per temperature the second state ('' when the first is not a whole frame or the route
    no longer fits)."""
    lines = continuations(model, prompt, temperatures, generator, max_new_tokens)
    if lines is None:
        return None
    states = []
    for line, temperature in zip(lines, temperatures, strict=True):
        after = None
        if line.endswith(FRAME_SEP):
            after = continuations(model, prompt + line + STEP_RETURN, [temperature], generator, max_new_tokens)
        states.append(after[0] if after else "")
    return states


def score_items(
    model: Model, prompts: list[ItemPrompts], decoding: Decoding, sandbox, settings: TraceSettings
) -> list[Scored]:
    """Decode every item's answers and check them (input answers executed in the sandbox, all at once)."""
    decode = Decoder(model, decoding)
    scored, calls = [], {}
    for item_prompts in prompts:
        entry = Scored(item_prompts)
        if item_prompts.problem is not None:
            failed = [Attempt(None, note=item_prompts.problem)] * len(decode.temperatures)
            entry.tasks = {"output": failed, "input": failed}
        else:
            for task, prompt, route in (
                ("output", item_prompts.output, False),
                ("output_breakpoint", item_prompts.breakpoint, True),
            ):
                if prompt is not None:
                    entry.tasks[task] = output_attempts(item_prompts.item, decode(prompt, route))
            assert item_prompts.input is not None
            entry.tasks["input"] = input_attempts(item_prompts.item, decode(item_prompts.input), calls)
        scored.append(entry)
    pending = list(calls.values())
    if pending:
        results = execute([(item, text) for item, text, _ in pending], sandbox, settings)
        for (_, _, attempts), (passed, note) in zip(pending, results, strict=True):
            for attempt in attempts:
                attempt.passed, attempt.note = passed, note
    return scored


class Decoder:
    """The model's answers to a prompt: greedy, then `decoding.samples` sampled; None: the prompt is too long."""

    def __init__(self, model: Model, decoding: Decoding):
        self.model, self.limit = model, decoding.max_new_tokens
        self.temperatures = decoding.temperatures()
        self.generator = torch.Generator(device=model.device).manual_seed(decoding.seed)

    def __call__(self, prompt: str, route: bool = False) -> list[str] | None:
        decode = route_continuations if route else continuations
        return decode(self.model, prompt, self.temperatures, self.generator, self.limit)


def output_attempts(item: FunctionRecord, texts: list[str] | None) -> list[Attempt]:
    """The predicted return states' values, each checked against the item's `output`."""
    if texts is None:
        return [Attempt(None, note=TOO_LONG)]
    assert item.output is not None
    values = [returned_value(text) for text in texts]
    return [Attempt(v, same_value(v, item.output), "" if v is not None else "not one return state") for v in values]


def input_attempts(item: FunctionRecord, texts: list[str] | None, calls: dict) -> list[Attempt]:
    """The predicted call states' arguments as argument text; each one that parses is added to `calls`
    ((item id, text) -> (item, text, its attempts)), to be run once in the sandbox."""
    if texts is None:
        return [Attempt(None, note=TOO_LONG)]
    attempts = []
    for text in texts:
        arguments = predicted_arguments(text)
        if arguments is None:
            attempts.append(Attempt(None, note="not one call state"))
            continue
        attempt = Attempt(call_input(item.code, item.entry, arguments))
        calls.setdefault((item.id, attempt.predicted), (item, attempt.predicted, []))[2].append(attempt)
        attempts.append(attempt)
    return attempts


def task_summary(scored: list[Scored], task: str, samples: int) -> dict | None:
    """pass@1 (greedy) over the items the task applies to, and pass@k over the samples."""
    attempts = [entry.tasks[task] for entry in scored if task in entry.tasks]
    if not attempts:
        return None
    summary: dict = {"items": len(attempts), "pass@1": sum(a[0].passed for a in attempts) / len(attempts)}
    if samples:
        ks = sorted({k for k in (1, 5, 10) if k <= samples} | {samples})
        summary["sampled_pass@k"] = {
            str(k): sum(pass_at_k(samples, sum(x.passed for x in a[1:]), k) for a in attempts) / len(attempts)
            for k in ks
        }
    return summary


def horizon_bucket(length: int | None) -> str:
    if length is None:
        return "no trace"
    low = 0
    for high in HORIZON_EDGES:
        if length < high:
            return f"{low}-{high - 1}"
        low = high
    return f">={low}"


def by_horizon(scored: list[Scored]) -> list[dict]:
    """Greedy pass@1 of output and input prediction (those scored) per trace-length bucket, shortest first (a
    list, so the results file keeps that order)."""
    buckets: dict[str, list[Scored]] = {}
    for entry in sorted(scored, key=lambda e: -1 if e.prompts.trace_length is None else e.prompts.trace_length):
        buckets.setdefault(horizon_bucket(entry.prompts.trace_length), []).append(entry)
    return [
        {
            "bucket": name,
            "items": len(entries),
            **{
                task: sum(e.tasks[task][0].passed for e in entries) / len(entries)
                for task in ("output", "input")
                if all(task in e.tasks for e in entries)
            },
        }
        for name, entries in buckets.items()
    ]


def item_row(entry: Scored) -> dict:
    prompts = entry.prompts
    row: dict = {"id": prompts.item.id, "trace_length": prompts.trace_length}
    if prompts.problem:
        row["problem"] = prompts.problem
    if not prompts.output_agrees:
        row["output_disagrees_with_trace"] = True
    for task, attempts in entry.tasks.items():
        greedy = attempts[0]
        row[task] = {"predicted": greedy.predicted, "pass": greedy.passed, "note": greedy.note}
        if len(attempts) > 1:
            row[task]["samples_passed"] = sum(a.passed for a in attempts[1:])
    return row


def evaluate_benchmark(
    run: str,
    benchmark_path: str,
    out: str,
    *,
    decoding: Decoding = Decoding(),
    sandbox: str = "bwrap",
    python: str | None = None,
    trace: TraceSettings | None = None,
    per_item: bool = False,
    device: str | None = None,
) -> dict:
    """Score the run's newest checkpoint on the benchmark file; writes and returns the results. `trace`: how
    items are traced and predictions run (default: the functions job's defaults; give the settings the run's
    corpus was traced with, so prompts render values as training did)."""
    trace = trace or TraceSettings()
    benchmark = read_benchmark(benchmark_path)
    model = Model.load(run, device or ("cuda" if torch.cuda.is_available() else "cpu"))
    box = make_sandbox(sandbox, python=python)
    prompts = trace_items(benchmark.items, box, trace)
    scored = score_items(model, prompts, decoding, box, trace)
    header = {
        "run": os.path.abspath(run),
        "step": model.step,
        "decoding": {
            "samples": decoding.samples,
            "temperature": decoding.temperature if decoding.samples else None,
            "seed": decoding.seed,
            "max_new_tokens": decoding.max_new_tokens,
        },
    }
    return write_results(out, header, benchmark, scored, decoding.samples, per_item)


def write_results(out: str, header: dict, benchmark: Benchmark, scored: list[Scored], samples: int, per_item: bool):
    """The results of scored items (after `header`: what was scored and how), written to `out` and returned."""
    results: dict = {
        **header,
        "benchmark": os.path.abspath(benchmark.path),
        "benchmark_sha256": benchmark.sha256,
        "items": len(benchmark.items),
        **{task: task_summary(scored, task, samples) for task in TASKS},
        "by_trace_length": by_horizon(scored),
        "not_scored": {
            e.prompts.item.id: e.prompts.problem or TOO_LONG
            for e in scored
            if e.prompts.problem or any(a[0].note == TOO_LONG for a in e.tasks.values())
        },
        "outputs_disagreeing_with_trace": [e.prompts.item.id for e in scored if not e.prompts.output_agrees],
    }
    if per_item:
        results["per_item"] = [item_row(entry) for entry in scored]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    return results


def benchmark_table(results: dict) -> str:
    """The console table of `tracegen evaluate --benchmark`."""
    samples = results["decoding"]["samples"]
    ks = [] if not samples else list((results["output"] or {}).get("sampled_pass@k", {}))
    scored = f"step {results['step']}" if "step" in results else f"{results['dialect']} completions"
    lines = [
        f"{scored}, benchmark {os.path.basename(results['benchmark'])} "
        f"(sha256 {results['benchmark_sha256'][:12]}), {results['items']} items",
        f"{'task':<24}{'items':>6}{'pass@1':>9}" + "".join(f"{'s-pass@' + k:>12}" for k in ks),
    ]
    for task, name in TASKS.items():
        summary = results.get(task)
        name = f"output ({results['dialect']} trace)" if task == "output" and "dialect" in results else name
        if summary:
            sampled = summary.get("sampled_pass@k", {})
            cells = "".join(f"{sampled[k]:>12.3f}" for k in ks)
            lines.append(f"{name:<24}{summary['items']:>6}{summary['pass@1']:>9.3f}{cells}")
    lines.append(f"{'trace length':<24}{'items':>6}{'output':>9}{'input':>9}")
    for row in results["by_trace_length"]:
        cells = "".join(f"{row[task]:>9.3f}" if task in row else f"{'-':>9}" for task in ("output", "input"))
        lines.append(f"{row['bucket']:<24}{row['items']:>6}{cells}")
    if results["not_scored"]:
        lines.append(f"not scored (counted as failed): {len(results['not_scored'])} items, see not_scored")
    for row in results.get("per_item", []):
        cells = "  ".join(f"{task} {'pass' if row[task]['pass'] else 'fail'}" for task in TASKS if task in row)
        lines.append(f"  {row['id']}: {cells}")
    return "\n".join(lines)
