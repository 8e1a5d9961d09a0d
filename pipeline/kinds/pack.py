"""The packing kind: a dataset's trajectories and Go examples, tokenized and packed into fixed-length samples.

    tracegen pack --data DATASET --out PACKED --seq-len N [--tokenizer bytes|bpe] [--vocab-size V] [--loss states|all]

The tokenizer is made on the driver (`bytes`: fixed; `bpe`: trained on every trajectory's text, read through
the source manifest) and saved beside the output as `tokenizer.json`. One unit per `trajectories` shard
(with the `traces` shards of the same source unit, for each trajectory's source kind) and one per Go
unit (its `go_next_event`, `go_runs` and `go_programs` shards); in a compacted dataset, one per compacted
group instead (a group holds whole units, all their tables: pipeline/engine/compaction.py); each writes `packed` rows
(schemas/packed.py). A unit's fingerprint is its shards' sha256s and the tokenizer's, so re-packing an
edited dataset re-runs exactly the shards that changed (all of them when a retrained BPE differs).
"""

import argparse
import posixpath
import re
from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow.parquet as pq

from pipeline.engine.config import KindConfig
from pipeline.engine.dataset import open_root, read_manifest, table_shards
from pipeline.engine.executor import Unit, UnitSink, fingerprint
from pipeline.engine.kind import JobKind, Throughput
from pipeline.engine.stats import StageCounters, StageOutput
from pipeline.engine.versions import resolve_dataset, shard_file
from pipeline.loader.split import is_heldout
from pipeline.loader.tokenizer import MODES, TOKENIZER_FILE, PackTokenizer, bytes_tokenizer, train_bpe
from pipeline.stages.pack.documents import Document, trajectory_group, trajectory_spans
from pipeline.stages.pack.go_examples import go_documents
from pipeline.stages.pack.packing import LOSS_MODES, PackSettings, pack_documents

_SHARD = re.compile(r"^(?P<prefix>.*?)(?P<table>[a-z_]+)/(?:part-(?P<unit>\d+)-\d+|(?P<group>compact-\d+))\.parquet$")
GO_TABLES = ("go_next_event", "go_runs", "go_programs")


@dataclass(frozen=True)
class PackConfig(KindConfig):
    """How samples are made: their length and loss mask, the tokenizer (bytes, or a BPE of vocab_size), and the
    share of sources held out of training for `tracegen evaluate` (pipeline/loader/split.py: by source)."""

    kind: ClassVar[str] = "pack"
    packing: PackSettings = field(default_factory=PackSettings)
    tokenizer: str = "bytes"
    vocab_size: int = 8192
    holdout: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if type(self.holdout) is not float or not 0.0 <= self.holdout < 1.0:
            raise ValueError(f"--holdout must be a fraction in [0, 1), got {self.holdout!r}")
        if self.tokenizer not in MODES:
            raise ValueError(f"--tokenizer must be one of {', '.join(MODES)}, got {self.tokenizer!r}")


@dataclass(frozen=True)
class PackShards:
    """A unit's payload: the source dataset directory, the shard paths per table, the tokenizer's JSON."""

    root: str
    shards: dict[str, tuple[str, ...]]
    tokenizer: str


def _read(root: str, paths: tuple[str, ...], columns: list[str] | None = None) -> list[dict]:
    fs, base = open_root(root)
    rows: list[dict] = []
    for path in paths:
        with fs.open_input_file(shard_file(base, path)) as handle:
            rows.extend(pq.read_table(handle, columns=columns).to_pylist())
    return rows


def _by_source_unit(
    fs, root: str, manifest: dict, tables: tuple[str, ...]
) -> dict[tuple[str, str], dict[str, list[dict]]]:
    """Shards grouped by the unit, or compacted group, (and version directory) that wrote them:
    {(prefix, "UNIT" or "compact-G"): {table: shards}}."""
    grouped: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for table in tables:
        for shard in table_shards(fs, root, manifest, table):
            match = _SHARD.match(shard["path"])
            if match is None or match["table"] != table:
                raise ValueError(
                    f"shard {shard['path']!r} is not named {table}/part-UNIT-SEQ.parquet or {table}/compact-G.parquet"
                )
            key = (match["prefix"], match["group"] or f"{int(match['unit']):05d}")
            grouped.setdefault(key, {name: [] for name in tables})[table].append(shard)
    return grouped


class PackKind(JobKind[PackConfig]):
    command = "pack"
    help = "tokenize and pack a dataset's trajectories and Go examples into fixed-length samples"
    throughput = Throughput("pack", "out", "samples")
    task_memory_mb = 4096
    smaller_units = "a unit is one unit of --data: trace with smaller units"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data", required=True, help="a dataset or versioned root (the --out of a job)")
        parser.add_argument("--seq-len", type=int, default=PackSettings.seq_len, help="tokens per sample")
        parser.add_argument("--tokenizer", choices=MODES, default="bytes", help="bytes (default) or a BPE trained here")
        parser.add_argument("--vocab-size", type=int, default=PackConfig.vocab_size, help="BPE vocabulary size")
        parser.add_argument(
            "--loss", choices=LOSS_MODES, default="states", help="states: predicted states only (default); all tokens"
        )
        parser.add_argument(
            "--holdout",
            type=float,
            default=PackConfig.holdout,
            help="share of sources (programs) left out of the samples, for tracegen evaluate (default 0)",
        )

    def configure(self, args: argparse.Namespace) -> tuple[str, PackConfig]:
        packing = PackSettings(seq_len=args.seq_len, loss=args.loss)
        return args.data, PackConfig(
            packing=packing, tokenizer=args.tokenizer, vocab_size=args.vocab_size, holdout=args.holdout
        )

    def units(self, source: str, config: PackConfig) -> list[Unit]:
        dataset = resolve_dataset(source)
        fs, root = open_root(dataset)
        manifest = read_manifest(fs, root)
        if manifest is None:
            raise ValueError(f"--data {source!r} holds no dataset (no manifest.json); give the --out of a tracegen job")
        tokenizer = self._tokenizer(dataset, manifest, config)
        plan = sorted(_by_source_unit(fs, root, manifest, ("trajectories", "traces")).items()) + sorted(
            _by_source_unit(fs, root, manifest, GO_TABLES).items()
        )
        units = []
        for (prefix, unit), shards in plan:
            if not shards.get("trajectories") and not shards.get("go_next_event"):
                continue
            paths = {table: tuple(shard["path"] for shard in found) for table, found in shards.items()}
            digest = fingerprint([s["sha256"] for found in shards.values() for s in found], tokenizer.fingerprint)
            kind = "go" if "go_next_event" in shards else "trajectories"
            unit_id = f"pack-{kind}-{posixpath.basename(prefix.rstrip('/')) or 'v'}-{unit}"
            units.append(Unit(len(units), unit_id, PackShards(dataset, paths, tokenizer.json), digest))
        if not units:
            raise ValueError(f"--data {source!r} holds no trajectories and no Go distributions to pack")
        return units

    @staticmethod
    def _tokenizer(dataset: str, manifest: dict, config: PackConfig) -> PackTokenizer:
        if config.tokenizer == "bytes":
            return bytes_tokenizer()
        fs, root = open_root(dataset)
        paths = tuple(shard["path"] for shard in table_shards(fs, root, manifest, "trajectories"))
        texts = (
            row["text"]
            for path in paths
            for row in _read(dataset, (path,), ["source_id", "text"])
            if not is_heldout(row["source_id"], config.holdout)
        )
        return train_bpe(texts, config.vocab_size)

    def beside(self, units: list[Unit], config: PackConfig) -> dict[str, str]:
        return {TOKENIZER_FILE: units[0].payload.tokenizer}

    def produce(self, payload: PackShards, unit_id: str, config: PackConfig, sink: UnitSink) -> StageOutput:
        counters = StageCounters("pack")
        with counters.timed():
            documents = self._documents(payload, config.holdout)
            counters.n_in = len(documents)
            rows, dropped = pack_documents(documents, PackTokenizer(payload.tokenizer), config.packing, unit_id)
        counters.n_out = len(rows)
        for reason, n in dropped.items():
            counters.drop(reason, n)
        return StageOutput({"packed": rows}, {"pack": counters})

    @staticmethod
    def _documents(payload: PackShards, holdout: float) -> list[Document]:
        """The unit's documents, without those of held-out sources."""
        shards = payload.shards
        if "go_next_event" in shards:
            rows, runs, programs = (_read(payload.root, shards[table]) for table in GO_TABLES)
            kept = [row for row in rows if not is_heldout(row["program_id"], holdout)]
            return go_documents(kept, runs, programs)
        kinds = {
            row["trace_id"]: row["source_kind"]
            for row in _read(payload.root, shards.get("traces", ()), ["trace_id", "source_kind"])
        }
        columns = ["trajectory_id", "trace_id", "source_id", "direction", "text"]
        return [
            Document(
                "trajectories",
                row["trajectory_id"],
                trajectory_group(kinds.get(row["trace_id"], "unknown"), row["direction"]),
                trajectory_spans(row["text"]),
            )
            for row in _read(payload.root, shards["trajectories"], columns)
            if not is_heldout(row["source_id"], holdout)
        ]
