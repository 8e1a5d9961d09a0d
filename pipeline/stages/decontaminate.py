"""Decontamination: what is dropped because its code matches an item of a benchmark file (`--decontaminate`).

A `Decontaminator` is built once, on the driver, from the benchmark files (pipeline/sources/benchmark.py) and
travels in the kind's config to every Ray task (small: one MinHash signature, a set of n-grams and an
input/output key per item). Its hashed part is the files' paths and sha256s and the rules' parameters, so the
manifest's `config` records what a dataset was cleaned against, and another benchmark set is another config
hash (its units re-run). Code matches an item when any one rule holds:

  * `minhash`: the estimated Jaccard similarity of their MinHash signatures reaches `threshold` (default 0.8).
    The signatures are the dedup's (pipeline/stages/dedup.py: the same normalisation, shingles of 5 tokens,
    128 permutations, seed), over the code alone (entry and input left empty: a copy called with another
    input is still a copy). Every item is compared (numpy, exact: no LSH band misses); the score is the
    similarity of the most similar item.
  * `ngram`: they share a run of `ngram` (13) consecutive normalised tokens (the classic n-gram rule): the
    dedup's tokens (formatting and comments dropped) with the names kept as written. With the names numbered
    instead, 13 tokens are about one line and a common header (`def v0 ( v1 ) : v2 = [ ] for v3 in v1 :`) is
    shared by unrelated functions: a sixth of a generated unrelated set matched a three-item benchmark; renamed
    copies are the minhash rule's. An item of fewer tokens is never matched by this rule. The score is the
    share of the item's 13-token runs the code holds.
  * `io` (function records only): the record's `output` (the expected return value's literal, when its line
    gives one; nothing is traced for it) and its input equal an item's, token for token with formatting
    dropped. The score is 1.0.
The minhash rule is tried first, then ngram, then io; the first that holds names the row in `contaminated`.
For the minhash rule identifiers are numbered by first appearance (the dedup's normalisation), so renamed
variables and reformatting never hide a copy; a changed constant changes one token, a few shingles.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from pipeline.engine.config import Option, setting
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.sources.benchmark import read_benchmark
from pipeline.stages.dedup import DedupSettings, normalised_tokens, signature, signature_matrix

RULES = ("minhash", "ngram", "io")
BENCHMARKS = Option(
    "--decontaminate",
    "benchmark JSONL files ({id, code, input, output, entry?}): drop what matches an item (MinHash of the dedup's "
    "shingles, a shared 13-token run, or a function record's input and output); each drop is a `contaminated` row",
    nargs="+",
    metavar="FILE",
    show=list,
    default_text="none",
)


@dataclass(frozen=True)
class BenchmarkFile:
    """A benchmark file as a dataset records it: where it was read and its content's sha256."""

    path: str
    sha256: str


@dataclass(frozen=True)
class Match:
    """The benchmark item a piece of code matched: its file, its id, the rule that held and its score."""

    benchmark: BenchmarkFile
    item_id: str
    rule: str
    score: float


@dataclass(frozen=True)
class BenchmarkIndex:
    """The items of the benchmark files, ready to compare against (not hashed: the files' sha256s stand for it)."""

    items: tuple[tuple[int, str], ...] = ()  # (file position, item id), one per item
    signatures: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.uint64))
    ngrams: dict[str, int] = field(default_factory=dict)  # shingle -> the first item that holds it
    ngram_counts: tuple[int, ...] = ()  # shingles per item (0: shorter than one n-gram)
    io: dict[tuple[str, str], int] = field(default_factory=dict)  # (input, output) -> the first item


@dataclass(frozen=True)
class Decontaminator:
    """The benchmark files and the rules' parameters (hashed), and the items' index (`index`, built from the
    files by `from_files`, the one way to make a decontaminator that matches). No benchmarks: nothing is ever
    dropped."""

    benchmarks: tuple[BenchmarkFile, ...] = setting((), BENCHMARKS)
    threshold: float = setting(
        0.8,
        Option("--decontaminate-threshold", "estimated Jaccard similarity from which code matches a benchmark item"),
    )
    ngram: int = 13
    index: BenchmarkIndex = setting(default_factory=BenchmarkIndex, hashed=False, compare=False, repr=False)

    def __post_init__(self):
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"--decontaminate-threshold must be in (0, 1], got {self.threshold}")
        if type(self.ngram) is not int or self.ngram < 1:
            raise ValueError(f"the decontamination n-gram must be an int >= 1, got {self.ngram!r}")

    @property
    def enabled(self) -> bool:
        return bool(self.benchmarks)

    @property
    def minhash(self) -> DedupSettings:
        """The dedup's MinHash parameters, at this threshold."""
        return DedupSettings(threshold=self.threshold)

    @classmethod
    def from_files(
        cls, paths: list[str] | tuple[str, ...], threshold: float = 0.8, ngram: int = 13
    ) -> "Decontaminator":
        """Read every benchmark file (a ValueError names a bad one) and index its items."""
        benchmarks = [read_benchmark(path, BENCHMARKS.flag) for path in paths]
        settings = cls(tuple(BenchmarkFile(b.path, b.sha256) for b in benchmarks), threshold, ngram)
        items = [(position, item) for position, b in enumerate(benchmarks) for item in b.items]
        ngrams: dict[str, int] = {}
        counts = []
        io: dict[tuple[str, str], int] = {}
        for k, (_, item) in enumerate(items):
            grams = settings._ngrams(item.code)
            counts.append(len(grams))
            for gram in grams:
                ngrams.setdefault(gram, k)
            io.setdefault(_io_key(item.input, item.output or ""), k)
        sigs = signature_matrix([(item.code, "", "") for _, item in items], settings.minhash)
        index = BenchmarkIndex(tuple((p, item.id) for p, item in items), sigs, ngrams, tuple(counts), io)
        return cls(settings.benchmarks, threshold, ngram, index)

    @classmethod
    def from_options(cls, benchmarks: list[str], threshold: float = 0.8) -> "Decontaminator":
        """The decontaminator `--decontaminate FILE... --decontaminate-threshold T` ask for, built on the driver."""
        return cls.from_files(benchmarks, threshold)

    def _ngrams(self, code: str) -> set[str]:
        """The code's runs of `ngram` normalised tokens, names as written (none when it is shorter)."""
        tokens = normalised_tokens(code, rename=False)
        return {" ".join(tokens[i : i + self.ngram]) for i in range(len(tokens) - self.ngram + 1)}

    def match(self, code: str, input_text: str | None = None, output: str | None = None) -> Match | None:
        """The first rule (minhash, ngram, io) by which `code` (and a record's input and output) matches an item."""
        index = self.index
        if not self.enabled or not index.items:
            return None
        similarity = (index.signatures == signature((code, "", ""), self.minhash)).mean(axis=1)
        best = int(np.argmax(similarity))
        if similarity[best] >= self.threshold:
            return self._match(best, "minhash", float(similarity[best]))
        shared: dict[int, int] = {}
        for gram in self._ngrams(code):
            item = index.ngrams.get(gram)
            if item is not None:
                shared[item] = shared.get(item, 0) + 1
        if shared:
            item = min(shared, key=lambda k: (-shared[k] / index.ngram_counts[k], k))
            return self._match(item, "ngram", shared[item] / index.ngram_counts[item])
        if input_text is not None and output is not None:
            item = index.io.get(_io_key(input_text, output))
            if item is not None:
                return self._match(item, "io", 1.0)
        return None

    def _match(self, item: int, rule: str, score: float) -> Match:
        position, item_id = self.index.items[item]
        return Match(self.benchmarks[position], item_id, rule, score)


def _io_key(input_text: str, output: str) -> tuple[str, str]:
    """An entry call's input and output with formatting dropped (the dedup's tokens, names kept)."""
    return " ".join(normalised_tokens(input_text, rename=False)), " ".join(normalised_tokens(output, rename=False))


def contaminated_row(match: Match, unit_id: str, table: str, dropped_id: str, source_id: str) -> dict:
    """The `contaminated` row of one drop (schemas/contaminated.py)."""
    return {
        "unit_id": unit_id,
        "table": table,
        "dropped_id": dropped_id,
        "source_id": source_id,
        "benchmark": match.benchmark.path,
        "benchmark_sha256": match.benchmark.sha256,
        "item_id": match.item_id,
        "rule": match.rule,
        "score": match.score,
    }


def counted(n_in: int, dropped: list[dict]) -> StageCounters:
    """The `decontaminate` stage's counters: `n_in` looked at, each drop counted by its rule."""
    counters = StageCounters("decontaminate")
    counters.n_in, counters.n_out = n_in, n_in - len(dropped)
    for rule in RULES:
        n = sum(1 for row in dropped if row["rule"] == rule)
        if n:
            counters.drop(f"contaminated_{rule}", n)
    return counters


class TraceCleaner:
    """A unit's traces matched by their `code` (the record's source, or the traced entry function's), batch by
    batch as the unit makes or reads them: what matches is dropped (with what was made from it) and is a
    `contaminated` row; `output()` holds those rows and the `decontaminate` counters (none when disabled)."""

    def __init__(self, decontaminator: Decontaminator, unit_id: str):
        self.decontaminator, self.unit_id = decontaminator, unit_id
        self.rows: list[dict] = []
        self.seconds = 0.0
        self.n_in = 0

    def matches(self, traces: list[dict]) -> dict[str, Match]:
        """{trace_id: match} of the traces whose code matches an item (each trace looked at once)."""
        if not self.decontaminator.enabled:
            return {}
        started = time.perf_counter()
        found = {}
        for trace in traces:
            match = self.decontaminator.match(trace["code"])
            if match is not None:
                found[trace["trace_id"]] = match
        self.seconds += time.perf_counter() - started
        return found

    def drop(self, rows: list[dict], matches: dict[str, Match], table: str, id_column: str) -> list[dict]:
        """The rows (of `table`) whose trace did not match; the others recorded as `contaminated` rows."""
        kept = []
        for row in rows:
            match = matches.get(row["trace_id"])
            if match is None:
                kept.append(row)
            else:
                self.rows.append(contaminated_row(match, self.unit_id, table, row[id_column], row["source_id"]))
        self.n_in += len(rows)
        return kept

    def output(self) -> StageOutput:
        if not self.decontaminator.enabled:
            return StageOutput({})
        counters = counted(self.n_in, self.rows)
        counters.seconds = self.seconds
        return StageOutput({"contaminated": self.rows}, {"decontaminate": counters})
