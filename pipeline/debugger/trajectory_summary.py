"""Text summary of `trajectories` rows for `tracegen inspect`: action mix, lengths, tokens, examples.

Takes rows as dicts (e.g. `polars.DataFrame.to_dicts()` or `pyarrow.Table.to_pylist()`), needing only
the columns direction, actions, states, exit, n_tokens and text, all at once or batch by batch.
"""

from collections import Counter

from pipeline.debugger.language import pretty


class TrajectoryReport:
    """The report gathered batch by batch (`add`), so a dataset's trajectories are never held at once: counts,
    the action mix and the per-row lengths (two ints a row) add up; only the best examples' rows are kept."""

    def __init__(self, examples: int = 1, show_code: bool = False):
        self.examples, self.show_code = examples, show_code
        self.by_exit: Counter = Counter()
        self.mix: Counter = Counter()
        self.lengths: list[int] = []
        self.n_tokens: list[int] = []
        self.chosen: dict[str, list[dict]] = {"forward": [], "inverse": []}

    def add(self, rows: list[dict]) -> None:
        self.by_exit.update((row["direction"], row["exit"]) for row in rows)
        self.mix.update(action["action"] for row in rows for action in row["actions"])
        self.lengths += [len(row["states"]) for row in rows]
        self.n_tokens += [row["n_tokens"] for row in rows]
        for direction, chosen in self.chosen.items():
            chosen += [row for row in rows if row["direction"] == direction]
            chosen.sort(key=lambda row: (abs(len(row["states"]) - 8), row["n_tokens"]))
            del chosen[self.examples :]

    def lines(self) -> list[str]:
        """Lines of text: counts by direction and exit, action mix, lengths, token histogram, decoded examples."""
        if not self.lengths:
            return ["trajectories: none"]
        lines = ["trajectories by direction and exit:"]
        lines += [f"  {direction:<8} {exit_:<7} {n:>8}" for (direction, exit_), n in sorted(self.by_exit.items())]
        total = sum(self.mix.values()) or 1
        lines.append("action mix: " + "  ".join(f"{name} {n} ({n / total:.1%})" for name, n in self.mix.most_common()))
        lengths = sorted(self.lengths)
        lines.append(f"states per trajectory: min {lengths[0]}  median {lengths[len(lengths) // 2]}  max {lengths[-1]}")
        lines.append("token-length histogram (byte-level tokens):")
        lines += [
            f"  {label:>15} {n:>8} {'#' * max(1, round(40 * n / len(lengths)))}"
            for label, n in token_histogram(self.n_tokens)
        ]
        for direction, chosen in self.chosen.items():
            for row in chosen:
                lines += [
                    "",
                    f"example {direction} trajectory of trace {row.get('trace_id')} "
                    f"({len(row['actions'])} actions, exit {row['exit']}, {row['n_tokens']} tokens):",
                    pretty(row["text"], show_code=self.show_code),
                ]
        return lines


def trajectory_report(rows: list[dict], examples: int = 1, show_code: bool = False) -> list[str]:
    """`TrajectoryReport`'s lines for rows held at once."""
    report = TrajectoryReport(examples, show_code)
    report.add(rows)
    return report.lines()


def token_histogram(n_tokens: list[int]) -> list[tuple[str, int]]:
    """Counts in power-of-two buckets: [(\"[lo, hi)\", count)], ascending, empty buckets omitted."""
    buckets = Counter(max(0, int(n).bit_length() - 1) for n in n_tokens)
    return [(f"[{1 << b}, {1 << (b + 1)})", buckets[b]) for b in sorted(buckets)]
