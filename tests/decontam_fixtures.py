"""A small benchmark file in CruxEval's shape, planted near-copies of its items and a generated set of unrelated
functions: what the decontamination tests of several directories (stages, kinds) share."""

import json
import random
from pathlib import Path

# Benchmark items: CruxEval-sized functions, each with its input and the literal of what f returns.
ITEMS = [
    {
        "id": "sample_0",
        "code": "def f(nums):\n    output = []\n    for n in nums:\n        output.append((nums.count(n), n))\n"
        "    output.sort(reverse=True)\n    return output\n",
        "input": "[1, 1, 3, 1, 3, 1]",
        "output": "[(4, 1), (4, 1), (4, 1), (4, 1), (2, 3), (2, 3)]",
    },
    {
        "id": "sample_1",
        "code": "def f(text, value):\n    new_text = list(text)\n    try:\n        new_text.append(value)\n"
        "        length = len(new_text)\n    except IndexError:\n        length = 0\n"
        "    return '[' + str(length) + ']'\n",
        "input": "'abv', 'a'",
        "output": "'[4]'",
    },
    {
        "id": "sample_2",
        "code": "def f(text):\n    result = ''\n    mid = (len(text) - 1) // 2\n    for i in range(mid):\n"
        "        result += text[i]\n    for i in range(mid, len(text) - 1):\n"
        "        result += text[mid + len(text) - 1 - i]\n    return result.ljust(len(text), text[-1])\n",
        "input": "'eat!'",
        "output": "'e!t!'",
    },
]

# Near-copies of the items: names changed, reformatted, one constant changed; the id says which item.
PLANTED = [
    {
        "id": "planted_renamed_0",
        "code": "def f(values):\n    pairs = []\n    for v in values:\n        pairs.append((values.count(v), v))\n"
        "    pairs.sort(reverse=True)\n    return pairs\n",
        "input": "[2, 2, 5]",
    },
    {
        "id": "planted_reformatted_1",
        "code": "def f(text,value):\n\n    new_text=list( text )\n    try:\n        new_text.append( value )\n"
        "        length=len(new_text)  # how long\n    except IndexError:\n        length=0\n"
        "    return '['+str(length)+']'\n",
        "input": "'xyz', 'q'",
    },
    {
        "id": "planted_constant_2",
        "code": "def f(s):\n    out = ''\n    mid = (len(s) - 1) // 3\n    for i in range(mid):\n        out += s[i]\n"
        "    for i in range(mid, len(s) - 1):\n        out += s[mid + len(s) - 1 - i]\n"
        "    return out.ljust(len(s), s[-1])\n",
        "input": "'hello!'",
    },
]
PLANTED_ITEM = {"planted_renamed_0": "sample_0", "planted_reformatted_1": "sample_1", "planted_constant_2": "sample_2"}

# A record with its own code whose input and output are an item's (the io rule).
SAME_IO = {"id": "same_io_1", "code": "def f(a, b):\n    return '[4]'\n", "input": "'abv',  'a'", "output": "'[4]'"}

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
