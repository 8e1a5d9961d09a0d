"""A generated corpus of small functions for the tracer and decode benches: ~800 records of ~14 events each.

Each record is one of a few shapes (an accumulating loop, a list built and summed, a dict of counts, a
string walked, a branchy search, a helper called twice), with its names, constants, operators and input
drawn from a seeded RNG: the same seed gives the same corpus. The shapes mix what real small functions
hold: ints that change every line, lists and dicts that grow, strings that stay, a nested call.
"""

import random

NAMES = ("total", "acc", "count", "value", "step", "limit", "result", "best", "seen", "item", "score", "width")
OPERATORS = ("+", "-", "*", "^", "|")


def _names(rng, k):
    return rng.sample(NAMES, k)


def _accumulate(rng):
    acc, step = _names(rng, 2)
    op = rng.choice(OPERATORS)
    code = (
        f"def f(n, base):\n"
        f"    {acc} = base\n"
        f"    for {step} in range(n):\n"
        f"        {acc} = {acc} {op} ({step} * {rng.randint(2, 9)})\n"
        f"    return {acc} % {rng.randint(5, 97)}\n"
    )
    return code, f"{rng.randint(3, 5)}, {rng.randint(0, 50)}"


def _build_list(rng):
    out, item = _names(rng, 2)
    code = (
        f"def f(n):\n"
        f"    {out} = []\n"
        f"    for {item} in range(n):\n"
        f"        {out}.append({item} * {item} + {rng.randint(1, 9)})\n"
        f"    return sum({out}), len({out})\n"
    )
    return code, str(rng.randint(3, 5))


def _count_chars(rng):
    counts, char = _names(rng, 2)
    word = "".join(rng.choice("abcde") for _ in range(rng.randint(4, 5)))
    code = (
        f"def f(text):\n"
        f"    {counts} = {{}}\n"
        f"    for {char} in text:\n"
        f"        {counts}[{char}] = {counts}.get({char}, 0) + 1\n"
        f"    return max({counts}, key={counts}.get)\n"
    )
    return code, repr(word)


def _search(rng):
    lo, hi, mid = _names(rng, 3)
    values = sorted(rng.sample(range(100), 8))
    code = (
        f"def f(xs, target):\n"
        f"    {lo}, {hi} = 0, len(xs) - 1\n"
        f"    while {lo} <= {hi}:\n"
        f"        {mid} = ({lo} + {hi}) // 2\n"
        f"        if xs[{mid}] < target:\n"
        f"            {lo} = {mid} + 1\n"
        f"        else:\n"
        f"            {hi} = {mid} - 1\n"
        f"    return {lo}\n"
    )
    return code, f"{values}, {rng.choice(values) + rng.randint(0, 1)}"


def _helper(rng):
    left, right, scale = _names(rng, 3)
    code = (
        f"def scaled(x, k):\n"
        f"    {scale} = x * k\n"
        f"    return {scale} - {rng.randint(1, 5)}\n"
        f"\n"
        f"def f(a, b):\n"
        f"    {left} = scaled(a, {rng.randint(2, 4)})\n"
        f"    {right} = scaled(b, {rng.randint(2, 4)})\n"
        f"    return ({left}, {right}, {left} > {right})\n"
    )
    return code, f"{rng.randint(1, 30)}, {rng.randint(1, 30)}"


def _words(rng):
    words, longest, word = _names(rng, 3)
    text = " ".join(rng.choice(("red", "green", "blue", "amber", "teal")) for _ in range(3))
    code = (
        f"def f(text):\n"
        f"    {words} = text.split()\n"
        f"    {longest} = ''\n"
        f"    for {word} in {words}:\n"
        f"        if len({word}) > len({longest}):\n"
        f"            {longest} = {word}\n"
        f"    return {longest}.upper(), len({words})\n"
    )
    return code, repr(text)


SHAPES = (_accumulate, _build_list, _count_chars, _search, _helper, _words)


def small_functions(n=800, seed=0):
    """`n` records `{"id", "code", "input", "entry"}`, the same for the same seed."""
    rng = random.Random(seed)
    records = []
    for number in range(n):
        code, input_ = SHAPES[number % len(SHAPES)](rng)
        records.append({"id": f"small{number:04d}", "code": code, "input": input_, "entry": "f"})
    return records
