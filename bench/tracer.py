"""Tracer overhead, side by side in one run: untraced vs a bare counting settrace hook vs tracegen's tracer.

    .venv/bin/python bench/tracer.py [--repeat 5]

The workload is CPU-bound pure Python (loops, calls, small containers). Each variant runs the same
workload `--repeat` times; the best time is kept (noise on a shared machine only ever adds time).
Prints events/s and the overhead ratios; copy the table into bench/RESULTS.md.
"""

import argparse
import io
import sys
import time

from tracers.pytrace import Budgets, Tracer

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
FILENAME = "<bench>"


def load():
    namespace = {}
    exec(compile(WORKLOAD, FILENAME, "exec"), namespace)
    return namespace["f"]


def best_of(repeat, run):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    entry = load()
    lines = WORKLOAD.splitlines()

    untraced = best_of(args.repeat, lambda: entry(args.rounds))

    counted = [0]

    def counting_hook(frame, event, arg):
        if frame.f_code.co_filename != FILENAME:
            return None
        counted[0] += 1
        return counting_hook

    def run_counting():
        counted[0] = 0
        sys.settrace(counting_hook)
        try:
            entry(args.rounds)
        finally:
            sys.settrace(None)

    bare = best_of(args.repeat, run_counting)
    n_events = counted[0]

    def run_tracer():
        sink = io.StringIO()
        tracer = Tracer(
            lambda c: c.co_filename == FILENAME,
            lambda c, n: lines[n - 1],
            lambda line: (sink.write(line), sink.write("\n")),
            budgets=Budgets(max_events=10**9, max_bytes=1 << 40, max_seconds=600),
        )
        outcome = tracer.run(entry, (args.rounds,))
        assert outcome.exit == "normal" and outcome.n_events == n_events, outcome.as_dict()

    traced = best_of(args.repeat, run_tracer)
    print(f"python {sys.version.split()[0]}  workload f({args.rounds}): {n_events} events  best of {args.repeat}")
    print("| variant | seconds | events/s | × untraced | × bare hook |")
    print("|---|---|---|---|---|")
    for name, seconds in (
        ("untraced", untraced),
        ("bare counting settrace hook", bare),
        ("tracegen tracer (locals, reprs, JSON lines)", traced),
    ):
        print(
            f"| {name} | {seconds:.4f} | {n_events / seconds:,.0f} | {seconds / untraced:.1f} | {seconds / bare:.2f} |"
        )


if __name__ == "__main__":
    main()
