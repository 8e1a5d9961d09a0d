"""`tracegen evaluate --benchmark FILE --dialect cwm`: the same items, for a model that speaks the cwm dialect
(CWM's own trace format, `tracegen export --dialect cwm`) and is not a run of `tracegen pretrain`.

Two steps around the user's own model (adapter: docs/evaluation.md, "Benchmarks"): without `--completions`, `--out` gets
one `{"id", "prompt"}` line per item — CWM's trace-prediction prompt, the context and the entry call's frame;
the model continues each prompt with frames, written as `{"id", "completion"}` lines (the first line of an id is
its pass@1 answer, more lines of it are samples for pass@k, n being the most any item has: an item with fewer
counts the missing ones as wrong). With `--completions`, the answer of a completion is
the value of the frame that returns from the entry call (frames are followed by depth: a call frame opens one,
a return frame closes one), compared with `output` as literals. Only output prediction: the cwm dialect has no
inverse frames to ask for inputs with.
"""

import json
import os
from collections import defaultdict

from pipeline.debugger.language import END_OF_TEXT, FRAME_SEP, LanguageError, parse_state
from pipeline.evaluation.benchmark import Attempt, Scored, write_results
from pipeline.evaluation.benchmark_items import same_value, trace_items
from pipeline.sandbox import make_sandbox
from pipeline.sources.benchmark import read_benchmark
from pipeline.stages.trace_functions import TraceSettings


def entry_return_value(completion: str) -> str | None:
    """The value of the frame that returns from the entry call in a cwm completion (which starts inside it);
    None when no frame does before the completion ends or stops parsing."""
    depth = 1
    for frame in completion.split(END_OF_TEXT)[0].split(FRAME_SEP)[:-1]:
        try:
            state = parse_state(frame + FRAME_SEP, None)
        except LanguageError:
            return None
        if state.event == "call":
            depth += 1
        elif state.event == "return":
            depth -= 1
            if depth == 0:
                return state.arg
    return None


def write_cwm_prompts(
    benchmark_path: str, out: str, *, sandbox: str, python: str | None, trace: TraceSettings
) -> dict[str, str]:
    """Write the cwm prompt of every item that has one; returns the others, id -> why not."""
    benchmark = read_benchmark(benchmark_path)
    prompts = trace_items(benchmark.items, make_sandbox(sandbox, python=python), trace)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as handle:
        for item_prompts in prompts:
            if item_prompts.cwm is not None:
                handle.write(json.dumps({"id": item_prompts.item.id, "prompt": item_prompts.cwm}) + "\n")
    return {p.item.id: p.problem for p in prompts if p.problem is not None}


def read_completions(path: str) -> dict[str, list[str]]:
    """The completions per item id, in file order; a ValueError names a bad line."""
    completions: dict[str, list[str]] = defaultdict(list)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                completions[row["id"]].append(str(row["completion"]))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{path}:{number}: expected a JSON object with 'id' and 'completion' ({error})"
                ) from error
    return completions


def score_cwm_completions(
    benchmark_path: str,
    completions_path: str,
    out: str,
    *,
    sandbox: str,
    python: str | None,
    trace: TraceSettings,
    per_item: bool = False,
) -> dict:
    """Score a cwm model's completions of the prompts `write_cwm_prompts` wrote; writes and returns the results.
    An item without a completion is a failed one."""
    benchmark = read_benchmark(benchmark_path)
    completions = read_completions(completions_path)
    prompts = trace_items(benchmark.items, make_sandbox(sandbox, python=python), trace)
    samples = max((len(texts) - 1 for texts in completions.values()), default=0)
    scored = []
    for item_prompts in prompts:
        item = item_prompts.item
        assert item.output is not None
        texts = completions.get(item.id, [])
        if item_prompts.problem is not None or not texts:
            attempts = [Attempt(None, note=item_prompts.problem or "no completion")]
        else:
            values = [entry_return_value(text) for text in texts]
            attempts = [
                Attempt(v, same_value(v, item.output), "" if v is not None else "no return from the entry")
                for v in values
            ]
        scored.append(Scored(item_prompts, {"output": attempts}))
    header = {"dialect": "cwm", "completions": os.path.abspath(completions_path), "decoding": {"samples": samples}}
    return write_results(out, header, benchmark, scored, samples, per_item)
