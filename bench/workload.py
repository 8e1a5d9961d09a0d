"""What both in-process tracer benches share (bench/tracer.py, bench/monitoring.py): the function they trace
(loops, calls, a dict, a sort and an integer recurrence, so every event kind and several local types occur)
and the timer. Standard library only: bench/monitoring.py runs it under another interpreter."""

import time

WORKLOAD = """
def score(word):
    total = 0
    for position, char in enumerate(word):
        total += (position + 1) * (ord(char) - 96)
    return total

def rank(words):
    table = {}
    for word in words:
        table[word] = score(word)
    best = sorted(table, key=table.get, reverse=True)
    return best[:3], len(table)

def collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps

def f(rounds):
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    out = []
    for i in range(rounds):
        out.append((rank(words)[0][0], collatz(27 + i % 5)))
    return out[-1]
"""


def best_of(repeat, run):
    """The fastest of `repeat` calls of `run()`, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)
