"""Decontamination: what is dropped because its code matches an item of a benchmark file (`--decontaminate`).

A `Decontaminator` is built once, on the driver, from the benchmark files (pipeline/sources/benchmark.py) and
travels in the kind's config to every Ray task (small: one MinHash signature, a set of n-grams and an
input/output key per item). Its hashed part is the files' paths and sha256s, the rules' parameters and the
normalisation's version, so the manifest's `config` records what a dataset was cleaned against, and another
benchmark set is another config hash (its units re-run). Code matches an item when any one rule holds:

  * `minhash`: the estimated Jaccard similarity of their MinHash signatures reaches `threshold` (default 0.8).
    The signatures are the dedup's (pipeline/stages/dedup.py: shingles of 5 normalised tokens, 128 permutations,
    seed), over the code alone (entry and input left empty: a copy called with another input is still a copy).
    Every item is compared (numpy, exact: no LSH band misses); the score is the similarity of the most similar
    item.
  * `ngram`: they share a run of `ngram` (13) consecutive normalised tokens that holds at least CONTENT_TOKENS
    (3) content tokens (literals, attributes and methods, builtins, names kept as written; not numbered names,
    keywords or punctuation): the classic n-gram rule over the same tokens, for an item's code inside a longer
    function, or an item with a changed constant too short for the minhash rule. A run of shape alone (`def v0
    ( v0 ) : v1 = { } for v2 in v0 :`) is held by unrelated functions: without the content bound, 14% of a
    generated unrelated set matched a three-item benchmark (tests/stages/test_decontaminate.py), with it none.
    An item with no such run is never matched by this rule. The score is the share of the item's runs the code
    holds.
  * `io`: a call with an item's input returns the item's output: a function record's `output` (the literal its
    line gives, before tracing), or what a trace's entry call returned (its return event's value, after
    tracing: trace-functions and trace-repos, `TraceCleaner`), whatever the code looks like. Both sides are
    compared as values when they are Python literals (`io_key`), else token for token. The score is 1.0.
The minhash rule is tried first, then ngram, then io; the first that holds names the row in `contaminated`.
The normalisation is pipeline/stages/code_tokens.py (scope-aware: the names the code binds numbered, attributes,
methods, builtins, imports and constants kept, formatting, comments and docstrings dropped), computed once per
piece of code for both code rules: a renamed or reformatted copy has the item's tokens exactly, and a function
that calls another method is another function. Its version (`normalisation`) is hashed with the rules.

Go programs (`pack`, `go_programs` rows; benchmark items are Python): a Go program matches an item when one of its
token sequences holds a run of `ngram` (13) of the item's Python tokens, names as written (the ngram rule): its
Go tokens (`go_tokens`: comments dropped), where a transliterated 13-token stretch of an item shows, and the
Python tokens of each of its string literals, where an item's code carried in the program's text (a Python
snippet it embeds, prints or serves) shows. The minhash and io rules compare Python code and values and are not
applied to Go. The score is the share of the item's runs the program holds.
"""

import ast
import itertools
import keyword
import re
import time
from dataclasses import dataclass, field

import numpy as np

from pipeline.engine.config import Option, setting
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.sources.benchmark import read_benchmark
from pipeline.stages.code_tokens import NORMALISATION, normalised_tokens, written_tokens
from pipeline.stages.dedup import DedupSettings, signature_matrix, token_signature

RULES = ("minhash", "ngram", "io")
CONTENT_TOKENS = 3  # the least content tokens (`_is_content`) in a run of normalised tokens the ngram rule uses
_NUMBERED = re.compile(r"v\d+(_\d+)?$")
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
    written: dict[str, int] = field(default_factory=dict)  # a run of names as written -> the first item (Go)
    written_counts: tuple[int, ...] = ()
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
    normalisation: int = NORMALISATION  # pipeline/stages/code_tokens.py: the code rules' tokens
    index: BenchmarkIndex = setting(default_factory=BenchmarkIndex, hashed=False, compare=False, repr=False)

    def __post_init__(self):
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"--decontaminate-threshold must be in (0, 1], got {self.threshold}")
        if type(self.ngram) is not int or self.ngram < 1:
            raise ValueError(f"the decontamination n-gram must be an int >= 1, got {self.ngram!r}")
        if self.normalisation != NORMALISATION:
            raise ValueError(f"decontamination normalisation {self.normalisation} is not this version's")

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
        written: dict[str, int] = {}
        counts, written_counts = [], []
        io: dict[tuple[str, str], int] = {}
        for k, (_, item) in enumerate(items):
            grams = settings._ngrams(normalised_tokens(item.code), CONTENT_TOKENS)
            counts.append(len(grams))
            for gram in grams:
                ngrams.setdefault(gram, k)
            grams = settings._ngrams(written_tokens(item.code))
            written_counts.append(len(grams))
            for gram in grams:
                written.setdefault(gram, k)
            io.setdefault(io_key(item.input, item.output or ""), k)
        sigs = signature_matrix([(item.code, "", "") for _, item in items], settings.minhash)
        index = BenchmarkIndex(
            tuple((p, item.id) for p, item in items), sigs, ngrams, tuple(counts), written, tuple(written_counts), io
        )
        return cls(settings.benchmarks, threshold, ngram, index=index)

    @classmethod
    def from_options(cls, benchmarks: list[str], threshold: float = 0.8) -> "Decontaminator":
        """The decontaminator `--decontaminate FILE... --decontaminate-threshold T` ask for, built on the driver."""
        return cls.from_files(benchmarks, threshold)

    def _ngrams(self, tokens: list[str], least: int = 0) -> set[str]:
        """The runs of `ngram` tokens (none when there are fewer) holding at least `least` content tokens."""
        if least:
            content = list(itertools.accumulate((_is_content(t) for t in tokens), initial=0))
            starts = [i for i in range(len(tokens) - self.ngram + 1) if content[i + self.ngram] - content[i] >= least]
        else:
            starts = range(len(tokens) - self.ngram + 1)
        return {" ".join(tokens[i : i + self.ngram]) for i in starts}

    def match(self, code: str | None, input_text: str | None = None, output: str | None = None) -> Match | None:
        """The first rule (minhash, ngram, io) by which `code` (and a call's input and output) matches an item;
        without `code`, the io rule alone."""
        index = self.index
        if not self.enabled or not index.items:
            return None
        if code is not None:
            tokens = normalised_tokens(code)
            similarity = (index.signatures == token_signature(tokens, "", "", self.minhash)).mean(axis=1)
            best = int(np.argmax(similarity))
            if similarity[best] >= self.threshold:
                return self._match(best, "minhash", float(similarity[best]))
            found = self._shared(self._ngrams(tokens, CONTENT_TOKENS), index.ngrams, index.ngram_counts)
            if found is not None:
                return found
        if input_text is not None and output is not None:
            item = index.io.get(io_key(input_text, output))
            if item is not None:
                return self._match(item, "io", 1.0)
        return None

    def match_go(self, source: str) -> Match | None:
        """The item whose Python tokens (names as written) a Go source's tokens, or a string literal's Python
        tokens, share a run of `ngram` with (rule ngram)."""
        if not self.enabled or not self.index.items:
            return None
        tokens = go_tokens(source)
        grams = self._ngrams(tokens).union(
            *(self._ngrams(written_tokens(_go_string(t))) for t in tokens if t[0] in '`"')
        )
        return self._shared(grams, self.index.written, self.index.written_counts)

    def _shared(self, grams: set[str], indexed: dict[str, int], counts: tuple[int, ...]) -> Match | None:
        """The ngram match of the item sharing the largest share of its runs with `grams`, if any."""
        shared: dict[int, int] = {}
        for gram in grams:
            item = indexed.get(gram)
            if item is not None:
                shared[item] = shared.get(item, 0) + 1
        if not shared:
            return None
        item = min(shared, key=lambda k: (-shared[k] / counts[k], k))
        return self._match(item, "ngram", shared[item] / counts[item])

    def _match(self, item: int, rule: str, score: float) -> Match:
        position, item_id = self.index.items[item]
        return Match(self.benchmarks[position], item_id, rule, score)


def _is_content(token: str) -> bool:
    """A token that says what code does beyond its shape: a literal, an attribute, a builtin, a name kept as
    written (not a numbered name, a keyword or punctuation)."""
    return (token[0].isalnum() or token[0] in "_'\"") and not keyword.iskeyword(token) and not _NUMBERED.match(token)


def io_key(input_text: str, output: str) -> tuple[str, str]:
    """An entry call's input and output as compared by the io rule: the values' reprs when they are Python
    literals (so `'a'` and `"a"`, `(1,2)` and `(1, 2)` agree), else their tokens with formatting dropped."""
    return _literal(f"({input_text},)", input_text), _literal(output, output)


def _literal(text: str, fallback: str) -> str:
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return " ".join(written_tokens(fallback))


_GO_TOKEN = re.compile(
    r"//[^\n]*|/\*.*?\*/|(?P<t>`[^`]*`|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|[A-Za-z_]\w*|\d[\w.]*"
    r"|<<=|>>=|&\^=|\.\.\.|&&|\|\||<-|\+\+|--|==|!=|<=|>=|:=|<<|>>|&\^|[-+*/%&|^]=|\S)",
    re.S,
)


def go_tokens(source: str) -> list[str]:
    """A Go source's tokens: comments and whitespace dropped, everything else as written."""
    return [m.group("t") for m in _GO_TOKEN.finditer(source) if m.group("t") is not None]


def _go_string(literal: str) -> str:
    """The text of a Go string literal: a raw one's content, an interpreted one's escapes decoded (as Python
    decodes the same escapes; its content as written when they differ)."""
    if literal[0] == "`":
        return literal[1:-1]
    try:
        return str(ast.literal_eval(literal))
    except (ValueError, SyntaxError):
        return literal[1:-1]


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


def counted(n_in: int, dropped: list[dict], stage: str = "decontaminate") -> StageCounters:
    """The decontamination stage's counters: `n_in` looked at, each drop counted by its rule."""
    counters = StageCounters(stage)
    counters.n_in, counters.n_out = n_in, n_in - len(dropped)
    for rule in RULES:
        n = sum(1 for row in dropped if row["rule"] == rule)
        if n:
            counters.drop(f"contaminated_{rule}", n)
    return counters


def returned(trace: dict) -> str | None:
    """The value a trace's entry call returned (its last entry-frame return event's repr), None when the call
    did not end normally."""
    if trace.get("exit") != "normal":
        return None
    for event in reversed(trace.get("events") or []):
        if event["event"] == "return" and event["depth"] == 0:
            return event["arg"]
    return None


class TraceCleaner:
    """A unit's traces matched by their `code` (the record's source, or the traced entry function's) and, when
    they hold their events, by their entry call's input and return value (the io rule), batch by batch as the
    unit makes or reads them: what matches is dropped (with what was made from it) and is a `contaminated` row;
    `output()` holds those rows and the counters of `stage` (none when disabled). `by_code=False` applies the io
    rule alone (trace-functions: the code rules held before tracing)."""

    def __init__(self, decontaminator: Decontaminator, unit_id: str, stage: str = "decontaminate", by_code=True):
        self.decontaminator, self.unit_id, self.stage, self.by_code = decontaminator, unit_id, stage, by_code
        self.rows: list[dict] = []
        self.seconds = 0.0
        self.n_in = 0

    def matches(self, traces: list[dict]) -> dict[str, Match]:
        """{trace_id: match} of the traces that match an item (each trace looked at once)."""
        if not self.decontaminator.enabled:
            return {}
        started = time.perf_counter()
        found = {}
        for trace in traces:
            code = trace["code"] if self.by_code else None
            match = self.decontaminator.match(code, trace.get("input"), returned(trace))
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

    def drop_programs(self, programs: list[dict]) -> set[str]:
        """The program_ids of the Go programs (`go_programs` rows) whose `.go` files match an item
        (`Decontaminator.match_go`), each recorded as a `contaminated` row of table go_programs."""
        if not self.decontaminator.enabled:
            return set()
        started = time.perf_counter()
        dropped = set()
        for program in programs:
            source = "\n".join(f["text"] for f in program["files"] if f["path"].endswith(".go"))
            match = self.decontaminator.match_go(source)
            if match is not None:
                dropped.add(program["program_id"])
                pid = program["program_id"]
                self.rows.append(contaminated_row(match, self.unit_id, "go_programs", pid, pid))
        self.n_in += len(programs)
        self.seconds += time.perf_counter() - started
        return dropped

    def output(self) -> StageOutput:
        if not self.decontaminator.enabled:
            return StageOutput({})
        counters = counted(self.n_in, self.rows, self.stage)
        counters.seconds = self.seconds
        return StageOutput({"contaminated": self.rows}, {self.stage: counters})
