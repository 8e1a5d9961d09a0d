"""A small benchmark file in CruxEval's shape, planted near-copies of its items and a generated set of unrelated
functions: what the decontamination tests of several directories (stages, kinds) share."""

import json
import random
from pathlib import Path

# Benchmark items, written for these tests: small functions of a benchmark's size, each with its input and the
# literal of what f returns.
ITEMS = [
    {
        "id": "bench_0",
        "code": "def f(words):\n    lengths = {}\n    for word in words:\n        size = len(word)\n"
        "        lengths[size] = lengths.get(size, 0) + 1\n"
        "    ranked = sorted(lengths.items(), key=lambda pair: (-pair[1], pair[0]))\n    return ranked\n",
        "input": "['ab', 'cd', 'efg', 'h']",
        "output": "[(2, 2), (1, 1), (3, 1)]",
    },
    {
        "id": "bench_1",
        "code": "def f(items, index):\n    picked = list(items)\n    try:\n        picked.pop(index)\n"
        "        size = len(picked)\n    except IndexError:\n        size = -1\n"
        "    return '<' + str(size) + '>'\n",
        "input": "'wxyz', 2",
        "output": "'<3>'",
    },
    {
        "id": "bench_2",
        "code": "def f(word):\n    built = ''\n    half = len(word) // 2\n    for i in range(half):\n"
        "        built += word[i].upper()\n    for i in range(half, len(word)):\n"
        "        built += word[len(word) - 1 - i + half]\n    return built.center(len(word) + 2, '*')\n",
        "input": "'spin'",
        "output": "'*SPni*'",
    },
]

# Near-copies of the items: names changed, reformatted, one constant changed; the id says which item.
PLANTED = [
    {
        "id": "planted_renamed_0",
        "code": "def f(tokens):\n    counts = {}\n    for tok in tokens:\n        width = len(tok)\n"
        "        counts[width] = counts.get(width, 0) + 1\n"
        "    order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))\n    return order\n",
        "input": "['a', 'bb', 'cc']",
    },
    {
        "id": "planted_reformatted_1",
        "code": "def f(items,index):\n\n    picked=list( items )\n    try:\n        picked.pop( index )\n"
        "        size=len(picked)  # what is left\n    except IndexError:\n        size=-1\n"
        "    return '<'+str(size)+'>'\n",
        "input": "'pq', 5",
    },
    {
        "id": "planted_constant_2",
        "code": "def f(w):\n    out = ''\n    half = len(w) // 3\n    for i in range(half):\n"
        "        out += w[i].upper()\n    for i in range(half, len(w)):\n"
        "        out += w[len(w) - 1 - i + half]\n    return out.center(len(w) + 2, '*')\n",
        "input": "'planet'",
    },
]
PLANTED_ITEM = {"planted_renamed_0": "bench_0", "planted_reformatted_1": "bench_1", "planted_constant_2": "bench_2"}

# A record with its own code whose input and output are an item's (the io rule).
SAME_IO = {"id": "same_io_1", "code": "def f(a, b):\n    return '<3>'\n", "input": "'wxyz',  2", "output": "'<3>'"}

# A record with its own code and no `output` whose traced call, with an item's input, returns the item's output
# (the io rule after tracing).
TRACED_IO = {
    "id": "traced_io_1",
    "code": "def f(s, k):\n    return '<' + str(len(s) - 1) + '>'\n",
    "input": "'wxyz', 2",
}

NAMES = ("total", "acc", "count", "value", "step", "limit", "result", "best", "seen", "item", "score", "width")


def unrelated_functions(count: int, seed: int = 0) -> list[dict]:
    """`count` small functions of several shapes (loops, lists, dicts, strings, searches), names, constants and
    operators drawn from a seeded RNG: none is a copy of a benchmark item."""
    rng = random.Random(seed)
    records = []
    for k in range(count):
        a, b, c = rng.sample(NAMES, 3)
        op = rng.choice("+-*^|")
        n1, n2, n3 = rng.randint(2, 9), rng.randint(5, 97), rng.randint(1, 20)
        shapes = [
            f"def f(n, base):\n    {a} = base\n    for {b} in range(n):\n        {a} = {a} {op} ({b} * {n1})\n"
            f"    return {a} % {n2}\n",
            f"def f(n):\n    {a} = []\n    for {b} in range(n):\n        {a}.append({b} * {b} + {n1})\n"
            f"    return sum({a}), len({a})\n",
            f"def f(words):\n    {a} = {{}}\n    for {b} in words:\n        {a}[{b}] = {a}.get({b}, 0) + {n1}\n"
            f"    return sorted({a}.items())\n",
            f"def f(text):\n    {a} = 0\n    for {b} in text:\n        if {b}.isupper():\n            {a} += {n1}\n"
            f"        elif {b} == ' ':\n            {a} -= 1\n    return {a}\n",
            f"def f(xs, target):\n    {a} = None\n    for {b}, {c} in enumerate(xs):\n"
            f"        if {c} > target and ({a} is None or {c} < xs[{a}]):\n            {a} = {b}\n"
            f"    return {a} if {a} is not None else -{n3}\n",
            f"def f(x):\n    def {a}(y):\n        return y * {n1} {op} {n2}\n    return {a}({a}(x)) % {n2}\n",
        ]
        records.append({"id": f"unrelated_{k}", "code": shapes[k % len(shapes)], "input": str(n3)})
    return records


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


# An item's code as written, inside a longer function (the ngram rule: too little of it for the minhash rule).
EMBEDDED = {
    "id": "embedded_2",
    "code": "def g(rows):\n"
    + "".join(f"    rows = [r * {k} for r in rows if r % {k + 2}]\n" for k in range(12))
    + "    return rows\n\n\n"
    + ITEMS[2]["code"],
    "input": "'abc'",
    "entry": "f",
}
