"""What a refresh must run: every source's units, each with a key that names what it computes.

A unit's key covers its kind, its source, what it reads (a repository's resolved commit or its sdist's
`name==version`, a Go program's files, the content of the function records it traces) and its kind's config
hash. A unit whose key is
in the latest published version is reused by reference; any other is run; a published unit whose key is
no longer wanted (a removed or changed source) is dropped with its rows. Planning is deterministic:
the same sources on the same commits plan the same keys in the same order, so a run killed before its
commit and started again finds its finished units' completion records at the same positions.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from git import GitCommandError
from git.cmd import Git

from pipeline.engine.executor import fingerprint
from pipeline.kinds.functions import Chunk, FunctionsConfig, decontaminate, drop_keys, find_duplicates, read_counted
from pipeline.kinds.go import GoConfig, program_units
from pipeline.kinds.repos import ReposConfig, piece_suffix, plan_repos
from pipeline.refresh.sources import Sources
from pipeline.sources.function_records import FunctionRecord
from pipeline.sources.repo_manifest import RepoSpec

SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class RefreshConfigs:
    """The config of each kind a refresh runs (each hashed on its own: a Go setting never re-runs repos)."""

    functions: FunctionsConfig = field(default_factory=FunctionsConfig)
    repos: ReposConfig = field(default_factory=ReposConfig)
    go: GoConfig = field(default_factory=GoConfig)

    def by_command(self) -> dict:
        return {"trace-functions": self.functions, "trace-repos": self.repos, "trace-go": self.go}


@dataclass(frozen=True)
class PlannedUnit:
    """One unit a refresh wants in its version; `covers`: the content hashes of the function records it
    traces (functions chunks only), so a published chunk is kept only while all of them still are."""

    key: str
    command: str
    unit_id: str
    payload: Any
    covers: tuple[str, ...] = ()
    source: str = ""


def resolve_commit(url: str, ref: str) -> str | None:
    """The commit `ref` names in the repository at `url` now (GitPython's ls-remote), None when the
    repository or the ref cannot be reached; a full SHA is its own commit."""
    if SHA.fullmatch(ref):
        return ref
    try:
        listing = Git().ls_remote(url, ref)
    except GitCommandError:
        return None
    found: dict[str, str] = {}
    for line in str(listing).splitlines():
        sha, _, name = line.partition("\t")
        found[name] = sha
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in found:
            return found[name]
    return None


def repo_units(specs: Iterable[RepoSpec], config: ReposConfig) -> list[PlannedUnit]:
    """One unit per repository at its current commit, or per piece of a suite larger than `tests_per_unit`
    (`plan_repos`, cut at that commit); one that cannot be resolved keeps its ref, so its task records why (a
    clone or ref failure row) and the key stays the same until it resolves again. An sdist's `name==version` is
    immutable: the same pin plans the same key, and nothing is re-run."""
    resolved = []
    for spec in specs:
        if spec.sdist:  # name==version never changes: its key is the spec's, with no look-up
            commit, pinned, label = spec.sdist, spec, spec.sdist
        else:
            commit = resolve_commit(spec.url, spec.ref)
            pinned = spec if commit is None else replace(spec, ref=commit)
            label = commit[:12] if commit else "unresolved"
        resolved.append((spec, commit, pinned, label))
    plans = iter(plan_repos([pinned for _, commit, pinned, _ in resolved if commit is not None], config))
    planned = []
    for spec, commit, pinned, label in resolved:
        for piece in next(plans) if commit is not None else [pinned]:
            what = repr(replace(piece, input_ref=""))
            key = fingerprint("repo", config.hash(), what, commit is None)
            unit_id = f"repo-{spec.name}@{label}{piece_suffix(piece)}"
            planned.append(PlannedUnit(key, "trace-repos", unit_id, piece, source=spec.name))
    return planned


def go_units(directory: str, config: GoConfig) -> list[PlannedUnit]:
    return [
        PlannedUnit(
            fingerprint("go", directory, config.hash(), unit.fingerprint),
            "trace-go",
            unit.unit_id,
            unit.payload,
            source=directory,
        )
        for unit in program_units(directory)
    ]


def record_hash(record: FunctionRecord) -> str:
    return fingerprint(record.id, record.code, record.input, record.entry)


def function_units(path: str, config: FunctionsConfig, published: list[dict]) -> list[PlannedUnit]:
    """The units of one functions file: the published chunks all of whose records are still there (kept
    by key), new chunks of the records no kept chunk covers, and one unit for the rows the driver drops
    (unreadable lines, near-duplicates, copies of benchmark items). Dedup runs over the whole file in file order,
    as a from-scratch job's does, so a new record is checked against everything already published; so does
    decontamination, so a published chunk that holds a record the benchmark set now matches is not kept."""
    records, read_failures, read = read_counted(path)
    kept, duplicates, dedup = find_duplicates(records, config.dedup)
    counters, contaminated = {"read": read, "dedup": dedup}, []
    if config.decontaminate.enabled:
        kept, contaminated, counters["decontaminate"] = decontaminate(kept, config.decontaminate)
    hashes = {record_hash(record): record for record in kept}
    planned, covered = [], set()
    for unit in published:
        if unit["command"] == "trace-functions" and unit.get("source") == path and unit["covers"]:
            if set(unit["covers"]) <= hashes.keys() and not covered & set(unit["covers"]):
                planned.append(
                    PlannedUnit(unit["key"], unit["command"], unit["unit_id"], None, tuple(unit["covers"]), path)
                )
                covered |= set(unit["covers"])
    new = [record for record in kept if record_hash(record) not in covered]
    for start in range(0, len(new), config.chunk_size):
        chunk = new[start : start + config.chunk_size]
        covers = tuple(record_hash(record) for record in chunk)
        key = fingerprint("functions", path, config.hash(), covers)
        planned.append(
            PlannedUnit(key, "trace-functions", f"functions:{key[:12]}", Chunk(chunk, [], [], {}), covers, path)
        )
    if read_failures or duplicates or contaminated:
        key = fingerprint("functions-dropped", path, config.hash(), *drop_keys(read_failures, duplicates, contaminated))
        unit_id = f"functions:{key[:12]}"
        payload = Chunk(
            [],
            [dict(row, unit_id=unit_id) for row in read_failures],
            [dict(row, unit_id=unit_id) for row in duplicates],
            counters,
            [dict(row, unit_id=unit_id) for row in contaminated],
        )
        planned.append(PlannedUnit(key, "trace-functions", unit_id, payload, source=path))
    return planned


def plan(sources: Sources, configs: RefreshConfigs, published: list[dict]) -> list[PlannedUnit]:
    """Every unit the sources want now, in a deterministic order: repositories, functions files, Go."""
    planned = repo_units(sources.repos, configs.repos)
    for path in sources.functions:
        planned += function_units(path, configs.functions, published)
    for directory in sources.go:
        planned += go_units(directory, configs.go)
    return planned
