"""Each table of a versioned root as a Delta Lake table, so that a version reads without tracegen.

A refreshed version's files live in several version directories (pipeline/engine/versions.py), so a folder
is not a version; a Delta table is. Layout under a local ROOT:
    {table}/_delta_log/{N:020d}.json     Delta version N is dataset version N: its add/remove actions make the
                                         table's snapshot exactly the files version N's manifest lists
                                         (numRecords as stats). Delta version 0 is the empty table (protocol,
                                         metaData with the schema of schemas/).
    {table}/{M} -> ../versions/{M}/{table}
                                         a relative symlink per version whose files a commit adds: Delta paths
                                         are relative to the table root (`M/part-….parquet`; delta-rs reads
                                         neither `..` nor absolute paths), the Parquet files stay where the
                                         writer put them, and a moved or copied root (symlinks kept) still reads.
So `polars.scan_delta("ROOT/traces", version=N)`, DuckDB's `ATTACH 'ROOT/traces' (TYPE delta, VERSION N)`,
Spark and Ray Data read exactly version N.

Rules:
- The version's log entry (`_log/`) stays the commit point, across tables; the Delta commits follow it.
  `sync_logs` writes every one that is missing, in order, so a crash between the two is repaired by the next
  commit or refresh. A Delta commit is created exclusively (dataset.create_exclusive) and its bytes follow
  from the manifests alone, so two writers never disagree.
- Retention removes a version's files only once no table's latest Delta version lists them (`release`);
  the Delta versions that did list them then fail to read, as after Delta's VACUUM.
- A dataset version removed before its table's log was written (a root older than this module) is a
  Delta commit without actions: that Delta version reads as the one before it.
- Object stores have no symlinks: no Delta log is written there.
"""

import datetime as dt
import json
import os
import posixpath
import uuid
from collections.abc import Callable
from functools import cache

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.engine.dataset import create_exclusive
from pipeline.engine.reader import VERSIONS, committed_versions, log_entry, read_manifest, table_shards, version_dir
from schemas import TABLES, schema_of

DELTA_LOG = "_delta_log"
PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}

Listed = dict[str, dict[str, tuple[str, int]]]  # table -> {Delta path: (file, rows)}


def table_root(root: str, table: str) -> str:
    return f"{root}/{table}"


def sync_logs(fs: pafs.FileSystem, root: str) -> None:
    """Append to each table's Delta log the commits of the committed versions it lacks, in order (nothing to
    do when it lacks none; nothing on an object store). Call under the root's refresh lock."""
    if not isinstance(fs, pafs.LocalFileSystem):
        return
    committed = committed_versions(fs, root)
    if not committed:
        return
    listed = cache(lambda n: _listed(fs, root, n) if n in committed else None)
    for table in TABLES:
        _sync_table(root, table, committed[-1], listed)


def sync_logs_of_version(fs: pafs.FileSystem, dataset: str) -> None:
    """`sync_logs` for the versioned root whose version `dataset` is (`ROOT/versions/N`); nothing for a
    job's dataset directory."""
    parent = posixpath.dirname(dataset)
    if posixpath.basename(parent) == VERSIONS and posixpath.basename(dataset).isdigit():
        sync_logs(fs, posixpath.dirname(parent))


def release(fs: pafs.FileSystem, root: str, removed: list[int]) -> None:
    """Before retention deletes the `removed` versions: the logs are complete, no table's latest Delta
    version lists a file of theirs (else a RuntimeError: nothing is deleted), and their symlinks go."""
    if not removed or not isinstance(fs, pafs.LocalFileSystem) or all(_head(root, t) < 0 for t in TABLES):
        return  # no table log yet: nothing lists these files
    sync_logs(fs, root)
    for table in TABLES:
        head = _head(root, table)
        held = {path.split("/")[0] for path in _snapshot(root, table, head)} if head >= 0 else set()
        if held & {str(n) for n in removed}:
            raise RuntimeError(f"{table_root(root, table)}: Delta version {head} lists files of versions {held}")
    for table in TABLES:
        for n in removed:
            link = f"{table_root(root, table)}/{n}"
            if os.path.islink(link):
                os.unlink(link)


def _sync_table(root: str, table: str, latest: int, listed: Callable[[int], Listed | None]) -> None:
    head = _head(root, table)
    if head >= latest:
        return
    schema = _schema_string(schema_of(table))
    if head < 0:
        _commit(root, table, 0, [{"protocol": PROTOCOL}, {"metaData": _metadata(table, schema)}], "CREATE TABLE", 0)
        head = 0
    snapshot = _snapshot(root, table, head)
    current = _current_schema(root, table, head)
    for n in range(head + 1, latest + 1):
        version, timestamp = listed(n), _created_ms(root, n)
        if version is None:
            _commit(root, table, n, [], f"tracegen version {n} (removed before this log was written)", timestamp)
            continue
        files = version[table]
        actions: list[dict] = [] if current == schema else [{"metaData": _metadata(table, schema)}]
        actions += [
            {"remove": {"path": path, "deletionTimestamp": timestamp, "dataChange": True}}
            for path in sorted(snapshot - files.keys())
        ]
        for path in sorted(files.keys() - snapshot):
            file, rows = files[path]
            _link(root, table, int(path.split("/")[0]))
            info = os.stat(file)
            add = {
                "path": path,
                "partitionValues": {},
                "size": info.st_size,
                "modificationTime": info.st_mtime_ns // 1_000_000,
                "dataChange": True,
                "stats": json.dumps({"numRecords": rows}),
            }
            actions.append({"add": add})
        _commit(root, table, n, actions, f"tracegen version {n}", timestamp)
        snapshot, current = set(files), schema


def _listed(fs: pafs.FileSystem, root: str, n: int) -> Listed:
    """Version n's files per table, by Delta path (`M/{name}` for `versions/M/{table}/{name}`)."""
    directory = version_dir(root, n)
    manifest = read_manifest(fs, directory) or {}
    listed: Listed = {}
    for table in TABLES:
        listed[table] = {}
        for shard in table_shards(fs, directory, manifest, table):
            path = posixpath.normpath(f"{n}/{shard['path']}")  # relative to ROOT/versions
            version, owner, name = path.split("/", 2)
            if owner != table or not version.isdigit():
                raise ValueError(f"{directory}: {shard['path']} is not a file of a version's {table}/")
            listed[table][f"{version}/{name}"] = (f"{root}/{VERSIONS}/{path}", shard["rows"])
    return listed


def _head(root: str, table: str) -> int:
    """The table's latest Delta version, -1 when it has no log."""
    try:
        names = os.listdir(f"{table_root(root, table)}/{DELTA_LOG}")
    except FileNotFoundError:
        return -1
    found = [int(name[:20]) for name in names if len(name) == 25 and name.endswith(".json") and name[:20].isdigit()]
    return max(found, default=-1)


def _snapshot(root: str, table: str, version: int) -> set[str]:
    """The Delta paths of the table's snapshot at `version`, as deltalake reads them."""
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(table_root(root, table), version=version).get_add_actions(flatten=True))
    return set(adds.column("path").to_pylist())


def _current_schema(root: str, table: str, version: int) -> str:
    from deltalake import DeltaTable

    return _normal(DeltaTable(table_root(root, table), version=version).schema().to_json())


def _schema_string(schema: pa.Schema) -> str:
    from deltalake import Schema

    return _normal(Schema.from_arrow(schema).to_json())


def _normal(schema_string: str) -> str:
    return json.dumps(json.loads(schema_string), sort_keys=True, separators=(",", ":"))


def _metadata(table: str, schema: str) -> dict:
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"tracegen:{table}")),
        "name": table,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema,
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 0,
    }


def _created_ms(root: str, n: int) -> int:
    """When version n was committed (its log entry's `created`), in ms: the same bytes from every writer."""
    fs = pafs.LocalFileSystem()
    created = (log_entry(fs, root, n) or {}).get("created")
    return int(dt.datetime.fromisoformat(created).timestamp() * 1000) if created else 0


def _link(root: str, table: str, n: int) -> None:
    """`{table}/{n}` -> `../versions/{n}/{table}`, the directory a Delta path `n/…` names."""
    link, target = f"{table_root(root, table)}/{n}", f"../{VERSIONS}/{n}/{table}"
    if os.path.islink(link) and os.readlink(link) == target:
        return
    try:
        os.symlink(target, link)
    except FileExistsError:
        if os.readlink(link) != target:
            raise


def _commit(root: str, table: str, n: int, actions: list[dict], operation: str, timestamp: int) -> None:
    """Delta version n of the table: `actions` and a commitInfo, created exclusively; one already there
    (another writer's, the same bytes) is left as it is."""
    info = {"commitInfo": {"timestamp": timestamp, "operation": operation, "engineInfo": "tracegen"}}
    data = "".join(json.dumps(action, sort_keys=True) + "\n" for action in [*actions, info]).encode()
    fs = pafs.LocalFileSystem()
    fs.create_dir(f"{table_root(root, table)}/{DELTA_LOG}", recursive=True)
    try:
        create_exclusive(fs, f"{table_root(root, table)}/{DELTA_LOG}/{n:020d}.json", data)
    except FileExistsError:
        pass
