"""What the benches share: the function the in-process tracer benches trace (bench/tracer.py, bench/monitoring.py:
loops, calls, a dict, a sort and an integer recurrence, so every event kind and several local types occur), the
text functions of the generated repositories' packages (bench/repos.py, bench/monitoring.py,
bench/memory_data.py) and the timer. Standard library only: bench/monitoring.py runs it under another
interpreter."""

import time

TEXT_FUNCTIONS = """
def normalize(word):
    return word.strip(".,;:!?").lower()


def tokenize(text):
    words, current = [], []
    for char in text:
        if char.isspace():
            if current:
                words.append(normalize("".join(current)))
                current = []
        else:
            current.append(char)
    if current:
        words.append(normalize("".join(current)))
    return [word for word in words if word]


def frequencies(tokens):
    counts = {}
    for token in tokens:
        counts[token] = counts.get(token, 0) + 1
    return counts
"""

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
