"""The packing kind: a dataset's trajectories and Go examples, tokenized and packed into fixed-length samples.

    tracegen pack --data DATASET --out PACKED --seq-len N [--tokenizer bpe|bytes] [--vocab-size V] [--loss states|all]
                  [--unit-mb MB]

The tokenizer is made on the driver (`bytes`: fixed; `bpe`: trained on the trajectories' text of the sources not
held out, read through the source manifest — every k-th shard past BPE_SAMPLE_BYTES: `bpe_sample`) and saved beside
the output as `tokenizer.json`. One unit per `trajectories` shard (with the `traces` shards of the same source unit,
for each trajectory's source kind) and one per Go unit (its `go_next_event`, `go_trajectories`, `go_runs` and
`go_programs` shards); in a compacted dataset, one per compacted group instead (a group holds whole units, all their
tables: pipeline/engine/compaction/); each writes `packed` rows (schemas/packed.py). A unit's fingerprint is its
shards' sha256s and the tokenizer's, so re-packing an edited dataset re-runs exactly the shards that changed (all of
them when a retrained BPE differs).

A trajectories unit whose shards hold more than `--unit-mb` MiB (uncompressed, as their Parquet footers count
it: a compacted 512 MiB file, a large suite's shard) is split into *pieces*, each a contiguous run of row groups
of at most that size (at least one row group), read from the footers alone at plan time; a piece is a unit of
its own (`UNIT~pK`, its fingerprint names its row groups), with the same exactly-once and byte-identical
guarantees, so parallelism and retries are per piece. A unit reads its input a batch of rows at a time
(`pyarrow.ParquetFile.iter_batches`), and its samples go to the unit's sink as they fill
(pipeline/stages/pack/packing.py): memory is a batch, never a shard. Go examples and trajectory documents carry a
window of their prefix (pipeline/format/go_examples.py, go_trajectories.py), never more than `--seq-len` tokens.
"""

import posixpath
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import ClassVar

import pyarrow.compute as pc

from pipeline.engine.config import KindConfig, Option, setting
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.reader import (
    Dataset,
    open_dataset,
    row_group_bytes,
    row_group_pieces,
    shard_batches,
    shard_rows,
    shards_by_writer,
)
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.format.documents import Document, trajectory_group, trajectory_spans
from pipeline.format.go_examples import GoExamples, needed_runs
from pipeline.format.go_trajectories import needed_trajectory_runs, trajectory_documents
from pipeline.format.split import is_heldout
from pipeline.format.tokenizer import MODES, TOKENIZER_FILE, PackTokenizer, bytes_tokenizer, train_bpe
from pipeline.stages.decontaminate import Decontaminator, TraceCleaner
from pipeline.stages.pack.packing import LOSS_MODES, Packer, PackSettings

GO_TABLES = ("go_next_event", "go_trajectories", "go_runs", "go_programs")
BATCH_ROWS = 256  # rows decoded at a time (a Go run's events are one row: go_runs is read RUN_BATCH at a time)
RUN_BATCH = 8
MIB = 1 << 20
HELD_OUT = "held_out"  # the pack stage's drop reason of a document of a source held out for `tracegen evaluate`
BPE_SAMPLE_BYTES = 64 * MIB  # Parquet (zstd) bytes of trajectories a BPE reads, ~5x that in text: bpe_sample
# The options of the packing settings (pipeline/stages/pack/packing.py), which the kind offers.
PACKING_OPTIONS = {
    "seq_len": Option("--seq-len", "tokens per sample"),
    "loss": Option("--loss", "states: predicted states only; all: all tokens", choices=LOSS_MODES),
}


@dataclass(frozen=True)
class PackConfig(KindConfig):
    """How samples are made: their length and loss mask, the tokenizer (bytes, or a BPE of vocab_size), and the
    share of sources held out of training for `tracegen evaluate` (pipeline/format/split.py: by source),
    `unit_mb`: the most MiB of trajectories (uncompressed) one unit reads (a larger shard is split by row groups),
    and the benchmark files whose items' copies are left out (`decontaminate`: a trajectory whose trace's code
    matches one)."""

    kind: ClassVar[str] = "pack"
    tables: ClassVar[tuple[str, ...]] = ("packed", "contaminated", "failures")
    packing: PackSettings = setting(default_factory=PackSettings, options=PACKING_OPTIONS)
    # bench/RESULTS.md "Ablations": the BPE has 6.6x the bytes' held-out state exact match per token
    tokenizer: str = setting("bpe", Option("--tokenizer", "a BPE trained here, or bytes", choices=MODES))
    vocab_size: int = setting(2048, Option("--vocab-size", "BPE vocabulary size"))
    holdout: float = setting(
        0.0, Option("--holdout", "share of sources (programs) left out of the samples, for tracegen evaluate")
    )
    unit_mb: int = setting(
        256,
        Option(
            "--unit-mb",
            "the most MiB of trajectories (uncompressed) one unit reads; larger shards are split by row groups",
        ),
    )
    decontaminate: Decontaminator = setting(default_factory=Decontaminator, hashed="when_set")

    def __post_init__(self):
        super().__post_init__()
        if type(self.unit_mb) is not int or not 1 <= self.unit_mb <= 1 << 20:
            raise ValueError(
                f"--unit-mb must be an int in 1..1048576 (MiB of uncompressed trajectories a unit reads), "
                f"got {self.unit_mb!r}"
            )
        if type(self.holdout) is not float or not 0.0 <= self.holdout < 1.0:
            raise ValueError(f"--holdout must be a fraction in [0, 1), got {self.holdout!r}")
        if self.tokenizer not in MODES:
            raise ValueError(f"--tokenizer must be one of {', '.join(MODES)}, got {self.tokenizer!r}")


@dataclass(frozen=True)
class PackShards:
    """A unit's payload: the source dataset directory, the shard paths per table, the tokenizer's JSON, and
    for a piece of a split unit the row groups [first, stop) it reads of each of its trajectories shards (a
    shard not named there is read whole)."""

    root: str
    shards: dict[str, tuple[str, ...]]
    tokenizer: str
    row_groups: dict[str, tuple[int, int]] = field(default_factory=dict)


class PackKind(JobKind[PackConfig]):
    command = "pack"
    help = "tokenize and pack a dataset's trajectories and Go examples into fixed-length samples"
    config_type = PackConfig
    source = Option("--data", "a dataset or versioned root (the --out of a job)")
    throughput = Throughput("pack", "out", "samples")
    task_memory_mb = 4096
    smaller_units = "a smaller --unit-mb"

    def units(self, source: str, config: PackConfig) -> list[Unit]:
        dataset = open_dataset(source, "give the --out of a tracegen job", "--data")
        tokenizer = self._tokenizer(dataset, config)
        plan = sorted(shards_by_writer(dataset, ("trajectories", "traces")).items()) + sorted(
            shards_by_writer(dataset, GO_TABLES).items()
        )
        plan = [
            (key, shards)
            for key, shards in plan
            if shards.get("trajectories") or shards.get("go_next_event") or shards.get("go_trajectories")
        ]
        trajectory_paths = [shard["path"] for _, shards in plan for shard in shards.get("trajectories", [])]
        sizes = dict(zip(trajectory_paths, row_group_bytes(dataset, trajectory_paths), strict=True))
        units = []
        for (prefix, unit), shards in plan:
            paths = {table: tuple(shard["path"] for shard in found) for table, found in shards.items()}
            digest = fingerprint([s["sha256"] for found in shards.values() for s in found], tokenizer.fingerprint)
            kind = "go" if "go_next_event" in shards else "trajectories"
            unit_id = f"pack-{kind}-{posixpath.basename(prefix.rstrip('/')) or 'v'}-{unit}"
            pieces = [{}]
            if kind == "trajectories":
                found = paths["trajectories"]
                pieces = row_group_pieces(found, [sizes[path] for path in found], config.unit_mb * MIB)
            if len(pieces) == 1:
                units.append(Unit(len(units), unit_id, PackShards(dataset.uri, paths, tokenizer.json), digest))
                continue
            for k, ranges in enumerate(pieces):
                piece = {**paths, "trajectories": tuple(ranges)}
                payload = PackShards(dataset.uri, piece, tokenizer.json, ranges)
                piece_digest = fingerprint(digest, sorted((path, list(rg)) for path, rg in ranges.items()))
                units.append(Unit(len(units), f"{unit_id}~p{k}", payload, piece_digest))
        if not units:
            raise ValueError(f"--data {source!r} holds no trajectories and no Go distributions to pack")
        return units

    @staticmethod
    def _tokenizer(dataset: Dataset, config: PackConfig) -> PackTokenizer:
        if config.tokenizer == "bytes":
            return bytes_tokenizer()
        texts = (
            row["text"]
            for row in shard_rows(dataset.uri, bpe_sample(dataset.shards("trajectories")), ["source_id", "text"])
            if not is_heldout(row["source_id"], config.holdout)
        )
        return train_bpe(texts, config.vocab_size)

    def dataset_files(self, units: list[Unit], config: PackConfig) -> dict[str, str]:
        return {TOKENIZER_FILE: units[0].payload.tokenizer}

    def produce(self, payload: PackShards, unit_id: str, config: PackConfig, sink: UnitSink) -> StageOutput:
        counters = StageCounters("pack")
        cleaner = TraceCleaner(config.decontaminate, unit_id)
        with counters.timed():
            tokenizer = PackTokenizer(payload.tokenizer)
            packer = Packer(tokenizer, config.packing, unit_id, lambda rows: sink.write("packed", rows))
            skipped: Counter = Counter()  # documents of held-out sources; Go examples the window cannot fit
            if "go_next_event" in payload.shards:
                documents = self._go_documents(payload, config, tokenizer, skipped, cleaner)
            else:
                documents = self._trajectory_documents(payload, config.holdout, cleaner, skipped)
            packer.add_all(documents).finish()
        counters.n_in = packer.n_in + sum(skipped.values())
        counters.n_out = packer.n_out
        for reason, n in sorted((packer.dropped + skipped).items()):
            counters.drop(reason, n)
        return StageOutput({"packed": []}, {"pack": counters}) + cleaner.output()

    @staticmethod
    def _trajectory_documents(
        payload: PackShards, holdout: float, cleaner: TraceCleaner, skipped: Counter
    ) -> Iterator[Document]:
        """The unit's (or piece's) trajectories as documents, in row order, without those of held-out sources
        (counted in `skipped`) and those whose trace's code matches a benchmark item (`cleaner`: each a
        `contaminated` row)."""
        kinds, matches = {}, {}
        columns = ["trace_id", "source_kind", "code"] if cleaner.decontaminator.enabled else ["trace_id", "source_kind"]
        for batch in shard_batches(payload.root, payload.shards.get("traces", ()), columns, batch_rows=BATCH_ROWS):
            traces = batch.to_pylist()
            kinds.update((row["trace_id"], row["source_kind"]) for row in traces)
            matches.update(cleaner.matches(traces))
        columns = ["trajectory_id", "trace_id", "source_id", "direction", "text"]
        for row in shard_rows(payload.root, payload.shards["trajectories"], columns, row_groups=payload.row_groups):
            if is_heldout(row["source_id"], holdout):
                skipped[HELD_OUT] += 1
                continue
            if not cleaner.drop([row], matches, "trajectories", "trajectory_id"):
                continue  # a benchmark item's copy: its contaminated row is the cleaner's
            yield Document(
                "trajectories",
                row["trajectory_id"],
                trajectory_group(kinds.get(row["trace_id"], "unknown"), row["direction"]),
                trajectory_spans(row["text"]),
            )

    @staticmethod
    def _go_documents(
        payload: PackShards, config: PackConfig, tokenizer: PackTokenizer, skipped: Counter, cleaner: TraceCleaner
    ) -> Iterator[Document]:
        """The unit's Go examples (pipeline/format/go_examples.py) and trajectory documents
        (pipeline/format/go_trajectories.py), without held-out programs (counted in `skipped`) and programs whose
        source matches a benchmark item (`cleaner`: each a `contaminated` row): its exact rows and trajectory windows
        (no text: small), then the runs they show, read a few at a time, then one document at a time."""
        shards, root = payload.shards, payload.root
        copies = set()
        if cleaner.decontaminator.enabled:
            copies = cleaner.drop_programs(list(shard_rows(root, shards["go_programs"], ["program_id", "files"])))
        columns = ["program_id", "prefix_kind", "depth", "prefix_hash", "runs", "counts", "n"]
        rows: list[dict] = []
        for batch in _exact_rows(root, shards["go_next_event"], columns):
            kept = [row for row in batch if not is_heldout(row["program_id"], config.holdout)]
            skipped[HELD_OUT] += len(batch) - len(kept)
            rows.extend(kept)
        windows: list[dict] = []
        for row in shard_rows(root, shards.get("go_trajectories", ()), batch_rows=BATCH_ROWS):
            if is_heldout(row["program_id"], config.holdout):
                skipped[HELD_OUT] += 1
            else:
                windows.append(row)
        rows = [row for row in rows if row["program_id"] not in copies]
        windows = [row for row in windows if row["program_id"] not in copies]
        needed = needed_runs(rows) | needed_trajectory_runs(windows)
        programs = {program_id for program_id, _ in needed}
        sources = (program for program in shard_rows(root, shards["go_programs"]) if program["program_id"] in programs)
        runs = shard_rows(root, shards["go_runs"], ["program_id", "run_index", "events"], batch_rows=RUN_BATCH)
        examples = GoExamples(tokenizer, config.packing.seq_len, skipped).load(sources, runs, needed)
        return chain(examples.documents(rows), trajectory_documents(examples, windows))


def bpe_sample(shards: list[dict]) -> list[str]:
    """The trajectories shards a BPE is trained on: every k-th, in manifest order, so that about BPE_SAMPLE_BYTES
    of Parquet are read (all of them when they are fewer): the merges of a few hundred MB of trajectories are those of
    the whole corpus, and a corpus of 100 GB would otherwise hold the driver for hours."""
    total = sum(shard["bytes"] for shard in shards)
    stride = max(1, -(-total // BPE_SAMPLE_BYTES))
    return [shard["path"] for shard in shards[::stride]]


def _exact_rows(root: str, paths: tuple[str, ...], columns: list[str]) -> Iterator[list[dict]]:
    """The `exact` rows of go_next_event shards, a batch at a time (the other prefix kinds are never decoded
    to Python)."""
    for batch in shard_batches(root, paths, columns, batch_rows=BATCH_ROWS * 16):
        yield batch.filter(pc.field("prefix_kind") == "exact").to_pylist()
