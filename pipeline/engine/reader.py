"""Reading a dataset, the one way every reader does it: resolve a root or a version → list a table's shards →
open them → read their rows, batches or row groups.

Every reader goes through here: the kinds that read a dataset (pack, trajectories, rederive-go), `tracegen
inspect` and `report`, the exporters, the loader, `evaluate`, and the writing side when it reads what is
there (a job's previous manifest, compaction's sources, a refresh's latest version). It sits below
pipeline/engine/dataset.py (completion records, writing the manifest; the dataset layout) and
pipeline/engine/versions.py (committing, retention, the refresh lock; the versioned layout) and imports
neither: what each of them read of the other is here.

- `open_root`: a local path or URI as (filesystem, root path).
- `resolve_dataset`: the dataset directory to read for a URI: itself when it holds a manifest (a job's --out,
  an explicit ROOT/versions/N), else the latest committed version of the versioned root (never LATEST alone,
  never an uncommitted directory).
- `find_dataset` / `open_dataset`: a `Dataset` (its resolved URI, filesystem, root and manifest) that lists a
  table's shards in manifest order, inline or from its Parquet index (never a directory listing), and reads
  a shard's footer.
- `shard_writer`, `shards_by_writer`: what wrote a shard, read from its name (a unit's `part-UNIT-SEQ`, a
  compacted group's `compact-G`), and a dataset's shards grouped by it; `row_group_bytes`, `row_group_pieces`:
  shards' row groups from their footers, cut into pieces of a bounded size. No other reader parses a shard's name
  (the writers make them: pipeline/writers/parquet.py, pipeline/engine/compaction/files.py).
- `shard_batches`, `shard_rows`, `shard_row_groups`, `table_rows`: rows a batch or a row group at a time,
  never a shard at once; `read_shard` reads one whole, for compaction's small loose shards only.
"""

import hashlib
import json
import os
import posixpath
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

MANIFEST = "manifest.json"
FORMATS = ("tracegen-dataset/1", "tracegen-dataset/2")  # what readers accept; dataset.py writes the last
VERSIONS = "versions"
LOG = "_log"
BATCH_ROWS = 256
_SHARD = re.compile(r"^(?P<prefix>.*?)(?P<table>[a-z_]+)/(?:part-(?P<unit>\d+)-\d+|(?P<group>compact-\d+))\.parquet$")


def open_root(uri: str) -> tuple[pafs.FileSystem, str]:
    """Resolve a local path or URI to (filesystem, root path); local paths are made absolute."""
    if "://" not in uri:
        uri = os.path.abspath(uri)
    fs, root = pafs.FileSystem.from_uri(uri)
    return fs, root.rstrip("/")


def read_text(fs: pafs.FileSystem, path: str) -> str | None:
    try:
        with fs.open_input_stream(path) as source:
            return source.read().decode()
    except (FileNotFoundError, OSError):
        return None


def read_manifest(fs: pafs.FileSystem, root: str) -> dict | None:
    """The manifest at `root`, None when there is none; a ValueError for a format this code cannot read."""
    text = read_text(fs, f"{root}/{MANIFEST}")
    if text is None:
        return None
    manifest = json.loads(text)
    found = manifest.get("format", FORMATS[0])
    if found not in FORMATS:
        raise ValueError(f"{root}/{MANIFEST} is of format {found!r}; this tracegen reads {', '.join(FORMATS)}")
    return manifest


def read_index(fs: pafs.FileSystem, root: str, index: dict, what: str) -> pa.Table:
    """A Parquet index the manifest lists ({path, sha256}), checked against its sha256."""
    with fs.open_input_stream(f"{root}/{index['path']}") as source:
        data = source.read()
    if hashlib.sha256(data).hexdigest() != index["sha256"]:
        raise ValueError(f"{root}/{index['path']} ({what}) is not the file the manifest lists: it was replaced")
    return pq.read_table(pa.BufferReader(data))


def table_shards(fs: pafs.FileSystem, root: str, manifest: dict, table: str) -> list[dict]:
    """The shards of `table` in manifest order ({path, rows, bytes, sha256}): inline, or read from the
    table's Parquet index (checked against the sha256 the manifest records)."""
    entry = manifest.get("tables", {}).get(table, {})
    if "shard_index" not in entry:
        return entry.get("shards", [])
    return read_index(fs, root, entry["shard_index"], f"{table}'s shard index").to_pylist()


def shard_count(entry: dict) -> int:
    """How many shards a manifest's table entry lists (format 1 or 2)."""
    return entry["shard_count"] if "shard_count" in entry else len(entry.get("shards", []))


def shard_file(root: str, path: str) -> str:
    """Where a manifest's shard path (relative to its dataset directory, possibly `../M/...`) lives."""
    return posixpath.normpath(f"{root}/{path}")


def version_dir(root: str, n: int) -> str:
    return f"{root}/{VERSIONS}/{n}"


def log_path(root: str, n: int) -> str:
    return f"{root}/{LOG}/{n:020d}.json"


def committed_versions(fs: pafs.FileSystem, root: str) -> list[int]:
    """The committed version numbers, ascending (temporary files and anything else in _log/ ignored)."""
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/{LOG}", allow_not_found=True))
    names = [info.base_name for info in infos if info.type == pafs.FileType.File]
    return sorted(
        int(name[:20]) for name in names if len(name) == 25 and name.endswith(".json") and name[:20].isdigit()
    )


def latest_version(fs: pafs.FileSystem, root: str) -> int | None:
    versions = committed_versions(fs, root)
    return versions[-1] if versions else None


def log_entry(fs: pafs.FileSystem, root: str, n: int) -> dict | None:
    text = read_text(fs, log_path(root, n))
    return None if text is None else json.loads(text)


def resolve_dataset(uri: str) -> str:
    """The dataset directory a reader should open for `uri`: `uri` itself when it holds a manifest (a job's
    --out or an explicit ROOT/versions/N), else the latest committed version of the root `uri`; `uri`
    unchanged when it is neither (the reader then says it holds no dataset)."""
    fs, root = open_root(uri)
    if fs.get_file_info(f"{root}/{MANIFEST}").type == pafs.FileType.File:
        return uri
    latest = latest_version(fs, root)
    return uri if latest is None else f"{uri.rstrip('/')}/{VERSIONS}/{latest}"


@dataclass(frozen=True)
class Dataset:
    """A dataset directory opened for reading: `uri` (resolved: never a versioned root), its filesystem and
    root path, and its manifest."""

    uri: str
    fs: pafs.FileSystem
    root: str
    manifest: dict

    def shards(self, table: str) -> list[dict]:
        """`table`'s shards in manifest order (`table_shards`)."""
        return table_shards(self.fs, self.root, self.manifest, table)

    def paths(self, table: str) -> tuple[str, ...]:
        """`table`'s shard paths (relative to the dataset directory), in manifest order."""
        return tuple(shard["path"] for shard in self.shards(table))

    def open(self, path: str) -> pa.NativeFile:
        """The shard `path` (a manifest path), open for reading; the caller closes it."""
        return self.fs.open_input_file(shard_file(self.root, path))

    def footer(self, path: str) -> pq.FileMetaData:
        """The shard's Parquet footer (one small read): its row groups, their rows and sizes."""
        with self.open(path) as handle:
            return pq.ParquetFile(handle).metadata


def find_dataset(uri: str) -> Dataset | None:
    """The dataset at `uri` (a dataset directory, or a versioned root: its latest version); None when there is
    no manifest; a ValueError for a manifest format this code cannot read."""
    resolved = resolve_dataset(uri)
    fs, root = open_root(resolved)
    manifest = read_manifest(fs, root)
    return None if manifest is None else Dataset(resolved, fs, root, manifest)


def open_dataset(uri: str, hint: str, option: str = "") -> Dataset:
    """As `find_dataset`; none there is a ValueError "[OPTION ]'URI' holds no dataset (no manifest.json); HINT"."""
    dataset = find_dataset(uri)
    if dataset is None:
        named = f"{option} {uri!r}" if option else repr(uri)
        raise ValueError(f"{named} holds no dataset (no manifest.json); {hint}")
    return dataset


def shard_writer(path: str) -> tuple[str, str, str] | None:
    """(prefix, table, writer) of a shard path as a manifest lists it: the version directory before the table
    (`../M/`, or ""), the table, and what wrote it: "UNIT" (five digits) for a unit's `part-UNIT-SEQ.parquet`,
    "compact-G" for a compacted group's file; None for any other name."""
    match = _SHARD.match(path)
    if match is None:
        return None
    return match["prefix"], match["table"], match["group"] or f"{int(match['unit']):05d}"


def shards_by_writer(dataset: Dataset, tables: tuple[str, ...]) -> dict[tuple[str, str], dict[str, list[dict]]]:
    """Shards grouped by the unit, or compacted group, (and version directory) that wrote them:
    {(prefix, "UNIT" or "compact-G"): {table: shards}}."""
    grouped: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for table in tables:
        for shard in dataset.shards(table):
            found = shard_writer(shard["path"])
            if found is None or found[1] != table:
                raise ValueError(
                    f"shard {shard['path']!r} is not named {table}/part-UNIT-SEQ.parquet or {table}/compact-G.parquet"
                )
            grouped.setdefault((found[0], found[2]), {name: [] for name in tables})[table].append(shard)
    return grouped


def row_group_bytes(dataset: Dataset, paths: list[str]) -> list[list[int]]:
    """Each shard's row groups' uncompressed sizes, from its footer (read concurrently: one small read each)."""

    def sizes(path: str) -> list[int]:
        metadata = dataset.footer(path)
        return [metadata.row_group(g).total_byte_size for g in range(metadata.num_row_groups)]

    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(sizes, paths))


def row_group_pieces(paths: tuple[str, ...], sizes: list[list[int]], limit: int) -> list[dict[str, tuple[int, int]]]:
    """The shards' row groups, in order, cut into runs of at most `limit` bytes (at least one row group each):
    per piece {path: (first, stop)}. One piece when everything fits."""
    pieces: list[dict[str, tuple[int, int]]] = [{}]
    held = 0
    for path, groups in zip(paths, sizes, strict=True):
        for g, size in enumerate(groups):
            if held and held + size > limit:
                pieces.append({})
                held = 0
            first, _ = pieces[-1].get(path, (g, g))
            pieces[-1][path] = (first, g + 1)
            held += size
    return pieces


def read_shard(fs: pafs.FileSystem, root: str, path: str) -> pa.Table:
    """A whole shard at once: only for a unit's loose shards, small by construction (compaction merges them)."""
    with fs.open_input_file(shard_file(root, path)) as handle:
        return pq.ParquetFile(handle).read()  # a third cheaper than read_table on small files


def _parquet_files(uri: str, paths: Iterable[str]) -> Iterator[tuple[str, pq.ParquetFile]]:
    """The shards `paths` (manifest paths) of the dataset directory `uri`, opened one at a time, in order."""
    fs, root = open_root(uri)
    for path in paths:
        with fs.open_input_file(shard_file(root, path)) as handle:
            yield path, pq.ParquetFile(handle)


def shard_batches(
    uri: str,
    paths: Iterable[str],
    columns: list[str] | None = None,
    row_groups: dict[str, tuple[int, int]] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The rows of the dataset at `uri`'s shards `paths` (manifest paths), `columns` only, `batch_rows` at a time
    and in order, never a shard at once; `row_groups` limits a shard to its row groups [first, stop)."""
    for path, file in _parquet_files(uri, paths):
        first, stop = (row_groups or {}).get(path, (0, file.num_row_groups))
        if first < stop:
            yield from file.iter_batches(batch_size=batch_rows, row_groups=list(range(first, stop)), columns=columns)


def shard_rows(uri: str, paths: Iterable[str], columns: list[str] | None = None, **options) -> Iterator[dict]:
    """`shard_batches`' rows as Python rows (as pyarrow's `to_pylist`: maps are lists of pairs)."""
    for batch in shard_batches(uri, paths, columns, **options):
        yield from batch.to_pylist()


def shard_row_groups(uri: str, paths: Iterable[str], columns: list[str] | None = None) -> Iterator[pa.Table]:
    """The shards' rows one Parquet row group at a time, in order (for reports that want whole row groups)."""
    for _, file in _parquet_files(uri, paths):
        for group in range(file.num_row_groups):
            yield file.read_row_group(group, columns=columns)


def table_rows(uri: str, table: str, columns: list[str] | None = None) -> Iterator[dict]:
    """The rows of `table` (`columns` only), in manifest order, a batch at a time (`shard_rows`); `uri` is a
    dataset directory or a versioned root (its latest version); ValueError when it holds no dataset."""
    dataset = open_dataset(uri, "give the --out of a tracegen job")
    yield from shard_rows(dataset.uri, dataset.paths(table), columns)
