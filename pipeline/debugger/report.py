"""Text summary of `trajectories` rows for `tracegen inspect`: action mix, lengths, tokens, examples.

Takes rows as dicts (e.g. `polars.DataFrame.to_dicts()` or `pyarrow.Table.to_pylist()`), needing only
the columns direction, actions, states, exit, n_tokens and text.
"""

from collections import Counter

from pipeline.debugger.language import pretty


def trajectory_report(rows: list[dict], examples: int = 1, show_code: bool = False) -> list[str]:
    """Lines of text: counts by direction and exit, action mix, lengths, token histogram, decoded examples."""
    if not rows:
        return ["trajectories: none"]
    lines = ["trajectories by direction and exit:"]
    by_exit = Counter((row["direction"], row["exit"]) for row in rows)
    lines += [f"  {direction:<8} {exit_:<7} {n:>8}" for (direction, exit_), n in sorted(by_exit.items())]
    mix = Counter(action["action"] for row in rows for action in row["actions"])
    total = sum(mix.values()) or 1
    lines.append("action mix: " + "  ".join(f"{name} {n} ({n / total:.1%})" for name, n in mix.most_common()))
    lengths = sorted(len(row["states"]) for row in rows)
    lines.append(f"states per trajectory: min {lengths[0]}  median {lengths[len(lengths) // 2]}  max {lengths[-1]}")
    lines.append("token-length histogram (byte-level tokens):")
    lines += [
        f"  {label:>15} {n:>8} {'#' * max(1, round(40 * n / len(rows)))}"
        for label, n in token_histogram([row["n_tokens"] for row in rows])
    ]
    for direction in ("forward", "inverse"):
        chosen = [row for row in rows if row["direction"] == direction]
        chosen.sort(key=lambda row: (abs(len(row["states"]) - 8), row["n_tokens"]))
        for row in chosen[:examples]:
            lines += [
                "",
                f"example {direction} trajectory of trace {row.get('trace_id')} "
                f"({len(row['actions'])} actions, exit {row['exit']}, {row['n_tokens']} tokens):",
                pretty(row["text"], show_code=show_code),
            ]
    return lines


def token_histogram(n_tokens: list[int]) -> list[tuple[str, int]]:
    """Counts in power-of-two buckets: [(\"[lo, hi)\", count)], ascending, empty buckets omitted."""
    buckets = Counter(max(0, int(n).bit_length() - 1) for n in n_tokens)
    return [(f"[{1 << b}, {1 << (b + 1)})", buckets[b]) for b in sorted(buckets)]
