"""Decontamination: what it catches, what it keeps, what it costs; the normalisation before and after issue 38.

    .venv/bin/python bench/decontaminate.py [--items 300] [--records 3000] [--repeat 3] [--before 56346dd]

The benchmark file holds `--items` generated items (bench/small_functions.py, seed 1), each with the literal of
what `f(<input>)` returns (computed here: the code is the project's). From each item, bench/variants.py makes
four copies: `renamed` (every name its functions bind changed), `reformatted` (printed again, 2-space indents,
docstring, comments, blank lines), `constant` (one constant changed) and `io` (another function that returns the
item's output: caught only by the io rule, which applies after tracing). The unrelated set is `--records`
records built from examples/functions.jsonl as bench/dedup.py builds its documents (real small functions and
their renamed, padded and re-called copies; none written from the benchmark).

Both implementations run side by side in this process: `after` is this tree's pipeline/stages/decontaminate.py;
`before` is pipeline/stages/{dedup,decontaminate}.py at `--before` (read with `git show`, the rest of the tree
shared). Each is asked what the pipeline asks: a copy's code and input before tracing (corpus records carry no
`output`), and after is also asked the io rule with what the traced call returns (`repr` of the value, as the
trace's return event holds it). Prints, per implementation, the share of each class of copies caught (by any
item: the generated items share six shapes, so a copy with a changed constant may match a sibling), the share of
the unrelated records kept, and the matcher's and the dedup signature's records/s over the unrelated records (one
core, best of `--repeat`, the two implementations interleaved in every round).
"""

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dedup import documents  # noqa: E402
from small_functions import small_functions  # noqa: E402
from variants import change_constant, reformat, rename, same_io  # noqa: E402

CLASSES = ("renamed", "reformatted", "constant", "io")


def load_before(rev: str, directory: Path):
    """(the dedup module, the decontaminate module) at `rev`, imported from `directory`."""
    for name in ("dedup", "decontaminate"):
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:pipeline/stages/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        text = text.replace("from pipeline.stages.dedup import", "from before_dedup import")
        (directory / f"before_{name}.py").write_text(text)
    sys.path.insert(0, str(directory))
    return importlib.import_module("before_dedup"), importlib.import_module("before_decontaminate")


def benchmark_items(count: int) -> list[dict]:
    """Generated items, each with the literal of what it returns."""
    items = []
    for item in small_functions(count, seed=1):
        scope: dict = {}
        exec(item["code"], scope)  # the project's own generated code
        value = eval(f"f({item['input']})", scope)
        items.append({**item, "id": f"item{item['id']}", "output": repr(value), "value": repr(value)})
    return items


def copies(items: list[dict]) -> dict[str, list[tuple[str, str, str]]]:
    """{class: [(code, input, what the traced call returns)]}, one copy of each item per class (a class skips
    an item it cannot change)."""
    out: dict[str, list] = {name: [] for name in CLASSES}
    for k, item in enumerate(items):
        code, value, input_text = item["code"], item["value"], item["input"]
        out["renamed"].append((rename(code, f"_{k}"), input_text, value))
        out["reformatted"].append((reformat(code), input_text, value))
        changed = change_constant(code)
        if changed is not None:
            out["constant"].append((changed, input_text, value))
        out["io"].append((same_io(item["output"]), input_text, value))
    return out


def quality(traced_io: bool, matcher, variants: dict, unrelated: list) -> tuple:
    """({class: share caught}, unrelated flagged) of one matcher; `traced_io`: the io rule is also asked with
    what the traced call returns."""

    def found(code: str, input_text: str, value: str):
        match = matcher.match(code, input_text)  # before tracing: the code rules
        if match is None and traced_io:
            match = matcher.match(None, input_text, value)  # after tracing: the io rule
        return match

    shares = {
        name: sum(found(*v) is not None for v in copies_of) / len(copies_of) for name, copies_of in variants.items()
    }
    return shares, sum(matcher.match(code, value) is not None for code, _, value in unrelated)


def timings(implementations: dict, unrelated: list, repeat: int) -> dict:
    """{name: (matcher s, dedup signature s)} over the unrelated records, best of `repeat`, the implementations
    interleaved in every round (so a load change on the shared machine falls on both)."""
    best = {name: [float("inf"), float("inf")] for name in implementations}
    for _ in range(repeat):
        for name, (dedup_module, matcher) in implementations.items():
            settings = dedup_module.DedupSettings()
            started = time.perf_counter()
            for code, _, value in unrelated:
                matcher.match(code, value)
            middle = time.perf_counter()
            for doc in unrelated:
                dedup_module.signature(doc, settings)
            ended = time.perf_counter()
            best[name] = [min(best[name][0], middle - started), min(best[name][1], ended - middle)]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", default="56346dd", help="the commit whose dedup and decontaminate are `before`")
    args = parser.parse_args()
    from pipeline.stages import decontaminate, dedup

    items = benchmark_items(args.items)
    variants = copies(items)
    unrelated = documents(args.records)
    with tempfile.TemporaryDirectory(prefix="bench-decontaminate-") as scratch:
        before_dedup, before_decontaminate = load_before(args.before, Path(scratch))
        benchmark = Path(scratch) / "benchmark.jsonl"
        benchmark.write_text(
            "".join(json.dumps({k: v for k, v in item.items() if k != "value"}) + "\n" for item in items)
        )
        matchers = {
            "before": (before_dedup, before_decontaminate.Decontaminator.from_files([str(benchmark)])),
            "after": (dedup, decontaminate.Decontaminator.from_files([str(benchmark)])),
        }
        found = {
            name: quality(name == "after", matcher, variants, unrelated) for name, (_, matcher) in matchers.items()
        }
        seconds = timings(matchers, unrelated, args.repeat)
    n = len(unrelated)
    print(
        f"benchmark: {args.items} items; copies per class: "
        + ", ".join(f"{c} {len(v)}" for c, v in variants.items())
        + f"; unrelated: {n} records; python {sys.version.split()[0]}; before = {args.before}"
    )
    print(
        "| normalisation | " + " | ".join(f"{c} caught" for c in CLASSES) + " | unrelated kept | "
        "matcher records/s | dedup signatures records/s |"
    )
    print("|---|" + "---|" * (len(CLASSES) + 3))
    for name, (shares, flagged) in found.items():
        match_s, sign_s = seconds[name]
        print(
            f"| {name} | "
            + " | ".join(f"{shares[c]:.1%}" for c in CLASSES)
            + f" | {1 - flagged / n:.2%} ({flagged} flagged) | {n / match_s:,.0f} | {n / sign_s:,.0f} |"
        )
    (before_match, before_sign), (after_match, after_sign) = seconds["before"], seconds["after"]
    print(f"matcher records/s after / before: {before_match / after_match:.2f}")
    print(f"dedup signature records/s after / before: {before_sign / after_sign:.2f}")


if __name__ == "__main__":
    main()
