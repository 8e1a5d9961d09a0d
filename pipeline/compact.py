"""`tracegen compact DATASET`: merge a job's dataset's small shards into large files now, whatever its size.

Jobs compact by themselves at their end once a table has `--compact-min-shards` loose shards (or
`--compact-target-mb` of them); this command does it at once (`always`), for a dataset written before,
an incomplete one, or other sizes. A versioned root is compacted by `tracegen refresh` as it publishes.
The manifest is rewritten with the same config, units, failed units and stats: only the files change.
"""

import argparse
import json

import pyarrow.fs as pafs

from pipeline.engine.compaction.commit import compact_and_commit
from pipeline.engine.compaction.files import group_of
from pipeline.engine.compaction.settings import MODES, CompactionSettings
from pipeline.engine.dataset import UnitRecord, write_manifest
from pipeline.engine.reader import VERSIONS, open_root, read_manifest, read_text, table_shards

MB = 1 << 20


def add_compaction_options(parser: argparse.ArgumentParser, *, default_mode: str = "auto") -> None:
    """File and row-group sizes of compacted shards; never part of a config hash (the rows do not change)."""
    defaults = CompactionSettings()
    parser.add_argument(
        "--compact",
        choices=MODES,
        default=default_mode,
        help=f"merge the units' shards into large files: auto (once a table has --compact-min-shards loose "
        f"shards or --compact-target-mb of them), always, never (default {default_mode})",
    )
    parser.add_argument(
        "--compact-target-mb",
        type=int,
        default=defaults.target_bytes // MB,
        help=f"size of a compacted file, MiB of zstd Parquet (default {defaults.target_bytes // MB})",
    )
    parser.add_argument(
        "--row-group-mb",
        type=int,
        default=0,
        help="uncompressed MiB per row group of a compacted file (default 0: the table's own, 96)",
    )
    parser.add_argument(
        "--compact-min-shards",
        type=int,
        default=defaults.min_shards,
        help=f"auto: compact once a table has this many loose shards (default {defaults.min_shards})",
    )


def compaction_from(args: argparse.Namespace) -> CompactionSettings:
    return CompactionSettings(
        mode=args.compact,
        target_bytes=args.compact_target_mb * MB,
        row_group_bytes=args.row_group_mb * MB,
        min_shards=args.compact_min_shards,
    )


def dataset_records(fs: pafs.FileSystem, root: str, manifest: dict) -> list[UnitRecord]:
    """The completion records of the units whose files the manifest lists, in unit order (and of those a
    killed compaction had already moved into its groups: their slices are not listed yet)."""
    listed = {shard["path"] for table in manifest["tables"] for shard in table_shards(fs, root, manifest, table)}
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/_units", allow_not_found=True))
    records = []
    for info in infos:
        if info.type != pafs.FileType.File or not info.base_name.endswith(".json") or info.base_name.startswith("."):
            continue
        text = read_text(fs, info.path)
        record = UnitRecord.from_json(text) if text is not None else None
        if record is not None and record.config_hash == manifest["config_hash"]:
            shards = [shard for shards in record.shards.values() for shard in shards]
            if all(shard.path in listed or group_of(shard.path) is not None for shard in shards):
                records.append(record)
    return sorted(records, key=lambda record: record.unit)


def compact_dataset(uri: str, settings: CompactionSettings, *, workers=None, address=None) -> dict:
    """Compact the job dataset at `uri` (see module doc); returns its new manifest."""
    fs, root = open_root(uri)
    manifest = read_manifest(fs, root)
    if manifest is None:
        if fs.get_file_info(f"{root}/{VERSIONS}").type == pafs.FileType.Directory:
            raise ValueError(f"{uri!r} is a versioned root: tracegen refresh compacts each version it publishes")
        raise ValueError(f"{uri!r} holds no dataset (no manifest.json); give the --out of a tracegen job")
    if manifest.get("kind") == "refresh":
        raise ValueError(f"{uri!r} is a refresh's version: tracegen refresh compacts the versions it publishes")
    from pipeline.engine.orchestrate import start_ray

    start_ray(address, workers)
    records = dataset_records(fs, root, manifest)
    written, _ = compact_and_commit(
        fs,
        root,
        records,
        settings,
        int(manifest["config"].get("zstd_level", 3)),
        lambda records, extra: write_manifest(
            fs,
            root,
            records,
            kind=manifest["kind"],
            config=manifest["config"],
            config_hash=manifest["config_hash"],
            seed=manifest["seed"],
            code_version=manifest["code_version"],
            failed_units=manifest["failed_units"],
            files=manifest.get("files"),
            extra=extra,
        ),
        uri=uri,
        persist_records=True,
    )
    return written


def add_compact_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="a job's dataset directory or URI (its --out)")
    add_compaction_options(parser, default_mode="always")
    parser.add_argument("--workers", type=int, default=None, help="local Ray CPUs (default: all cores)")
    parser.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local one")


def run_compact(args: argparse.Namespace) -> int:
    manifest = compact_dataset(args.data, compaction_from(args), workers=args.workers, address=args.ray_address)
    counts = {name: table["shard_count"] for name, table in manifest["tables"].items() if table["rows"]}
    print(f"tracegen compact: {args.data}: files per table {json.dumps(counts, sort_keys=True)}")
    return 0
