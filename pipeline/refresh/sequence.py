"""`tracegen refresh`: plan → run only the units not yet published → commit a new version → report → retain.

Sequence, under the root's refresh lock (pipeline/engine/versions.py):
1. plan every unit the sources want now (pipeline/refresh/plan.py) and compare keys with the latest version;
2. nothing new and nothing dropped: publish nothing and say so;
3. run the new units into `versions/{N}/` with the engine's executor (completion records, deterministic
   shards; a killed run's finished units are reused by the next one);
4. compact (pipeline/engine/compaction/): a compacted file of an earlier version is reused by reference
   while every unit in it is still wanted; one that holds a dropped unit is broken, and its other units are
   re-written, by slice, into this version's compacted files, together with the loose units (new, or
   inherited) once the settings want them compacted;
5. write the version's manifest: its new files plus, by reference, the kept units' shards and compacted
   files of earlier versions; the dropped units' rows are simply not listed;
6. commit (create-exclusive log entry), rewrite LATEST, delete the version's own shards that compaction
   merged, write the report, then apply retention.
"""

import functools
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from pipeline.engine.compaction.commit import compact_and_commit
from pipeline.engine.compaction.plan import finish_pending
from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.dataset import INLINE_SHARDS, UnitRecord, write_index, write_manifest
from pipeline.engine.delta_tables import sync_logs
from pipeline.engine.executor import Unit, UnitSink, execute_unit, fingerprint
from pipeline.engine.job import code_version
from pipeline.engine.memory import OOM_RETRIES, UnitMemory, check_memory_settings
from pipeline.engine.orchestrate import map_tasks, run_units, start_ray
from pipeline.engine.progress import Progress
from pipeline.engine.reader import VERSIONS, latest_version, open_root, read_index, read_manifest, version_dir
from pipeline.engine.versions import commit_version, refresh_lock, retain, write_latest
from pipeline.kinds import kind_named
from pipeline.refresh.plan import PlannedUnit, RefreshConfigs, plan
from pipeline.refresh.sources import Sources, read_sources

RECORD_HASH = "refresh/1"  # completion records in a staging version; what a unit computes is in its key
UNITS_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("command", pa.string()),
        ("unit_id", pa.string()),
        ("source", pa.string()),
        ("covers", pa.list_(pa.string())),
        ("version", pa.int64()),
        ("record", pa.string()),
    ]
)


@dataclass
class RefreshResult:
    root: str
    version: int | None  # the version published, None when nothing was
    latest: int | None  # the latest committed version after the run
    units_run: int = 0
    units_reused: int = 0
    units_dropped: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    removed_versions: list[int] = field(default_factory=list)

    def summary(self) -> str:
        """One line, for logs and alerting."""
        failed = f"; {len(self.failed)} units FAILED: {', '.join(sorted(self.failed))}" if self.failed else ""
        if self.version is None:
            current = "no version yet" if self.latest is None else f"version {self.latest} is current"
            up_to_date = f"{self.units_reused} units up to date"
            return f"tracegen refresh: nothing new at {self.root} ({current}; {up_to_date}){failed}"
        return (
            f"tracegen refresh: published version {self.version} at {self.root} (units {self.units_run} run, "
            f"{self.units_reused} reused, {self.units_dropped} dropped; rows +{sum(self.added.values())} "
            f"-{sum(self.dropped.values())}; failure rows +{self.added.get('failures', 0)}){failed}"
        )


def produce_any(payload: tuple[str, Any], unit_id: str, configs: RefreshConfigs, sink: UnitSink):
    """A refresh unit's rows: its kind's own `produce` under that kind's config."""
    command, inner = payload
    return kind_named(command).produce(inner, unit_id, configs.by_command()[command], sink)


def preflight(sources: Sources, configs: RefreshConfigs) -> None:
    """Check the machine for each kind the sources use (a SetupError names what is missing)."""
    for command, used in (
        ("trace-repos", sources.repos),
        ("trace-functions", sources.functions),
        ("trace-go", sources.go),
    ):
        if used:
            kind_named(command).preflight(configs.by_command()[command])


def refresh(
    sources_path: str,
    root_uri: str,
    configs: RefreshConfigs,
    *,
    keep: int = 7,
    workers: int | None = None,
    address: str | None = None,
    report: bool = True,
    compaction: CompactionSettings | None = None,
    task_memory_mb: int | None = None,
    oom_retries: int = OOM_RETRIES,
) -> RefreshResult:
    """Bring the versioned dataset at `root_uri` up to date with the sources file (see module doc); each unit's
    task has `task_memory_mb` (None: its kind's default) and at most `oom_retries` resubmissions for memory."""
    if type(keep) is not int or keep < 1:
        raise ValueError(f"--keep must be an int >= 1, got {keep!r}")
    check_memory_settings(task_memory_mb, oom_retries)
    sources = read_sources(sources_path)
    fs, root = _open_root(root_uri)
    preflight(sources, configs)
    with refresh_lock(fs, root):
        latest = latest_version(fs, root)
        published = _published_and_finished(fs, root, latest)
        start_ray(address, workers)
        to_run, reused, dropped = _compare(plan(sources, configs, published), published)
        result = RefreshResult(root_uri, None, latest, units_reused=len(reused))
        if not to_run and not dropped:
            return result
        version = _NewVersion(fs, root, 1 if latest is None else latest + 1, latest, sources_path, configs, result)
        fs.create_dir(version.staging, recursive=True)
        records, result.failed = _run(to_run, version.staging, configs, workers, address, task_memory_mb, oom_retries)
        if not records and not dropped:
            return result
        version.entries = [_entry(planned, record, version.n) for planned, record in records] + [
            _inherited(unit, latest) for unit in reused if latest is not None
        ]
        version.units_run, version.units_dropped = len(records), len(dropped)
        result.added = _rows([record for _, record in records])
        result.dropped = _rows([UnitRecord.from_json(unit["record"]) for unit in dropped])
        compact_and_commit(
            fs,
            version.staging,
            [UnitRecord.from_json(entry["record"]) for entry in version.entries],
            compaction or CompactionSettings(),
            configs.functions.zstd_level,
            version.publish,
            uri=f"{root_uri.rstrip('/')}/{VERSIONS}/{version.n}",
            persist_records=False,
            mapper=functools.partial(map_tasks, address=address, workers=workers),
        )
        if report:
            _report(f"{root_uri.rstrip('/')}/versions/{version.n}")
        result.removed_versions = retain(fs, root, keep)
        return result


def _open_root(root_uri: str):
    """The root's filesystem and path, the directory created; a ValueError naming a root that cannot be."""
    fs, root = open_root(root_uri)
    try:
        fs.create_dir(root, recursive=True)
    except OSError as error:
        raise ValueError(f"--root {root_uri!r} cannot be created ({error}); choose another") from error
    return fs, root


def _published_and_finished(fs, root: str, latest: int | None) -> list[dict]:
    """The units the latest version publishes (none without one), once what a run killed after its commit left
    undone is finished: deleting its merged shards, its tables' Delta commits."""
    if latest is None:
        return []
    previous = read_manifest(fs, version_dir(root, latest))
    published = published_units(fs, version_dir(root, latest), previous)
    finish_pending(fs, version_dir(root, latest), [UnitRecord.from_json(u["record"]) for u in published])
    sync_logs(fs, root)
    return published


def _compare(wanted: list[PlannedUnit], published: list[dict]) -> tuple[list[PlannedUnit], list[dict], list[dict]]:
    """The wanted units to run (their key is not published), the published ones to reuse (in the order they are
    wanted) and those to drop (no longer wanted)."""
    by_key = {unit["key"]: unit for unit in published}
    keys = {unit.key for unit in wanted}
    to_run = [unit for unit in wanted if unit.key not in by_key]
    reused = [by_key[unit.key] for unit in wanted if unit.key in by_key]
    dropped = [unit for unit in published if unit["key"] not in keys]
    return to_run, reused, dropped


@dataclass
class _NewVersion:
    """Version `n` being made after `latest`: its units' entries (run here, then inherited) and what it
    changes; `publish` is its commit point, called by `compact_and_commit`."""

    fs: Any
    root: str
    n: int
    latest: int | None
    sources_path: str
    configs: RefreshConfigs
    result: RefreshResult
    entries: list[dict] = field(default_factory=list)
    units_run: int = 0
    units_dropped: int = 0

    @property
    def staging(self) -> str:
        return version_dir(self.root, self.n)

    def publish(self, committed: list[UnitRecord], extra: dict) -> None:
        """The version's manifest, its log entry and LATEST: the commit point of the refresh."""
        n, result = self.n, self.result
        units = [dict(entry, record=record.to_json()) for entry, record in zip(self.entries, committed, strict=True)]
        manifest = _write_manifest(self.fs, self.staging, units, self.configs, result.failed, n, self.latest, extra)
        entry = {
            "version": n,
            "created": manifest["created"],
            "previous": self.latest,
            "manifest": f"versions/{n}/manifest.json",
            "sources": self.sources_path,
            "units_run": self.units_run,
            "units_reused": result.units_reused,
            "units_dropped": self.units_dropped,
            "failed_units": result.failed,
            "added": result.added,
            "dropped": result.dropped,
            "rows": {name: table["rows"] for name, table in manifest["tables"].items()},
        }
        commit_version(self.fs, self.root, n, entry)
        result.version = result.latest = n
        result.units_run, result.units_dropped = self.units_run, self.units_dropped
        write_latest(self.fs, self.root, n)


def _run(
    to_run: list[PlannedUnit],
    staging: str,
    configs: RefreshConfigs,
    workers,
    address,
    task_memory_mb: int | None = None,
    oom_retries: int = OOM_RETRIES,
):
    """Run the new units into the staging version with the engine's executor; [(planned, record)], failed."""
    units = [Unit(index, p.unit_id, (p.command, p.payload), p.key) for index, p in enumerate(to_run)]
    work = functools.partial(
        execute_unit,
        produce=functools.partial(produce_any, configs=configs),
        out=staging,
        config_hash=RECORD_HASH,
        zstd_level=configs.functions.zstd_level,
    )
    records, failed = run_units(
        units,
        work,
        address=address,
        workers=workers,
        progress=Progress(),
        memory=functools.partial(_unit_memory, task_memory_mb=task_memory_mb),
        oom_retries=oom_retries,
    )
    by_index = {record.unit: record for record in records}
    return [(p, by_index[i]) for i, p in enumerate(to_run) if i in by_index], failed


def _unit_memory(unit: Unit, task_memory_mb: int | None) -> UnitMemory:
    """A refresh unit's memory: its kind's (the payload names the command), or --task-memory-mb for all."""
    kind = kind_named(unit.payload[0])
    return UnitMemory(task_memory_mb or kind.task_memory_mb, kind.smaller_units)


def _entry(planned: PlannedUnit, record: UnitRecord, n: int) -> dict:
    return {
        "key": planned.key,
        "command": planned.command,
        "unit_id": planned.unit_id,
        "source": planned.source,
        "covers": list(planned.covers),
        "version": n,
        "record": record.to_json(),
    }


def _inherited(unit: dict, latest: int) -> dict:
    """A published unit carried into the next version: its shard paths made relative to a sibling version."""
    record = UnitRecord.from_json(unit["record"])
    record.shards = {
        table: [
            info if info.path.startswith("../") else replace(info, path=f"../{latest}/{info.path}") for info in infos
        ]
        for table, infos in record.shards.items()
    }
    return dict(unit, record=record.to_json())


def _rows(records: list[UnitRecord]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for record in records:
        for table, infos in record.shards.items():
            totals[table] = totals.get(table, 0) + sum(info.rows for info in infos)
    return {table: rows for table, rows in sorted(totals.items()) if rows}


def published_units(fs, version_root: str, manifest: dict | None) -> list[dict]:
    """The units a version's manifest publishes (key, command, unit_id, source, covers, version, record):
    inline, or from its units index (format 2, past INLINE_SHARDS units)."""
    listed = (manifest or {}).get("refresh", {})
    if "units_index" in listed:
        return read_index(fs, version_root, listed["units_index"], "the refresh's units").to_pylist()
    return listed.get("units", [])


def _write_manifest(
    fs, staging: str, entries: list[dict], configs, failed, n: int, latest: int | None, extra: dict
) -> dict:
    """The version's manifest (the engine's, listing every entry's files) plus its units, for the next run:
    inline, or past INLINE_SHARDS units as `_index/refresh_units.parquet`."""
    config = {command: config.as_dict() for command, config in configs.by_command().items()}
    records = [UnitRecord.from_json(entry["record"]) for entry in entries]
    listed: dict = {"version": n, "previous": latest}
    if len(entries) <= INLINE_SHARDS:
        listed["units"] = entries
    else:
        table = pa.Table.from_pylist([dict(e, source=e.get("source", "")) for e in entries], schema=UNITS_SCHEMA)
        listed["units_index"] = write_index(fs, staging, "refresh_units", table)
    return write_manifest(
        fs,
        staging,
        records,
        kind="refresh",
        config=config,
        config_hash=fingerprint(config)[:16],
        seed=configs.functions.seed,
        code_version=code_version(),
        failed_units=failed,
        extra={**extra, "refresh": listed},
    )


def _report(version_uri: str) -> None:
    """The version's report.html and plots; a report that cannot be drawn never un-publishes a version."""
    try:
        from pipeline.version_report import write_report

        write_report(version_uri)
    except Exception as error:  # noqa: BLE001 (the version is committed; the report is a convenience)
        print(
            f"tracegen refresh: warning: no report for {version_uri}: {type(error).__name__}: {error}", file=sys.stderr
        )
