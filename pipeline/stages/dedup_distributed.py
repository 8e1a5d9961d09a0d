"""The distributed resolution of near-duplicates: the serial `resolve_duplicates` (pipeline/stages/dedup.py)
computed by tasks, by LSH band and union-find, so that nothing holds every signature.

From `DISTRIBUTED_DEDUP_FROM` records on (20,000; pipeline/kinds/functions.py) the resolution runs as tasks
(`resolve_distributed`; the job submits them through `pipeline.engine.orchestrate.RayTasks`):
  1. signature tasks (a block of records each) keep their signature matrix in the object store and hash each
     LSH band of each row (the same `MinHashLSH(threshold, num_perm).hashranges` as the serial index) into a
     64-bit key, split by key into `partitions`;
  2. band tasks own a range of bands and one key partition: they hold only those (position, key) pairs, sort
     them, and turn every bucket of two or more records into star edges (its first record → each other one);
  3. merge tasks, a few inputs at a time, union-find the edges (one int32 per record) into a forest: each
     record of a shared bucket → the lowest record of its connected component of "shares a band";
  4. scatter tasks read one contiguous block of signatures each and send the rows of colliding records to the
     resolve task of their component (a component is never split);
  5. resolve tasks run the serial resolution on their components' records in record order (`resolve_in_order`:
     `resolve_duplicates`' algorithm without a datasketch object per row, ~10x cheaper; tests pin the two equal).
The result is the serial one: a record's query only ever returns records of its component, so the serial
resolution restricted to a union of whole components makes the same decisions with the same similarities; a
record in no shared bucket is kept by both. A 64-bit key collision only joins two components, never splits
one, so it changes nothing either. The work is the serial work on colliding records only, in parallel; the
driver holds task handles and the result, never a signature. Task sizes (`ResolvePlan`) bound each task's
memory and never change the result; the one thing no size bounds is a single component, which one resolve
task holds whole (bench/RESULTS.md gives the sizes measured).
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from datasketch import MinHashLSH

from pipeline.stages.dedup import DedupSettings

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def lsh_bands(settings: DedupSettings) -> list[tuple[int, int]]:
    """The (start, end) hash ranges of the LSH bands, exactly those of the serial index."""
    lsh = MinHashLSH(threshold=settings.threshold, num_perm=settings.num_perm)
    return [(int(start), int(end)) for start, end in lsh.hashranges]


def band_keys(sigs: np.ndarray, start: int, end: int) -> np.ndarray:
    """A 64-bit key per row for the band sigs[:, start:end]: rows with equal bands get equal keys."""
    keys = np.full(len(sigs), ((start + 1) * int(_GOLDEN)) % (1 << 64), dtype=np.uint64)
    for column in range(start, end):
        keys ^= sigs[:, column].astype(np.uint64)
        keys *= _GOLDEN
        keys ^= keys >> np.uint64(29)
    return keys


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64 of int64 values (spreads positions and keys over partitions)."""
    z = values.astype(np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class Layout:
    """How band work is split: `groups` lists each band task's bands; keys are split into `partitions`."""

    groups: tuple[tuple[tuple[int, int], ...], ...]
    partitions: int


def signature_block(make: Callable[[Any], np.ndarray], payload: Any, start: int, layout: Layout) -> tuple:
    """Signature task: (the block's signature matrix, then for each band task (group × partition) a list with
    one (positions, keys) pair per band of the group)."""
    sigs = make(payload)
    positions = np.arange(start, start + len(sigs), dtype=np.int64)
    parts = []
    for group in layout.groups:
        keyed = [(positions, band_keys(sigs, lo, hi)) for lo, hi in group]
        if layout.partitions == 1:
            parts.append(keyed)
            continue
        owners = [(keys >> np.uint64(40)) % np.uint64(layout.partitions) for _, keys in keyed]
        for partition in range(layout.partitions):
            parts.append(
                [
                    (pos[owner == partition], keys[owner == partition])
                    for (pos, keys), owner in zip(keyed, owners, strict=True)
                ]
            )
    return (sigs, *parts)


def _hook(parent: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Union-find in place over `parent` (every entry pointing at its root, before and after): for each edge
    (a[i], b[i]) the larger root hooks under the smaller one, then paths are compressed, until no edge joins
    two roots. A root is therefore always the lowest node of its component."""
    while True:
        ra, rb = parent[a], parent[b]
        low, high = np.minimum(ra, rb), np.maximum(ra, rb)
        differ = low != high
        if not differ.any():
            return
        np.minimum.at(parent, high[differ], low[differ])
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent[:] = grand


def components(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The connected components of the edges (u[i], v[i]): (the nodes, sorted; the lowest node of each
    one's component)."""
    if len(u) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    nodes, inverse = np.unique(np.concatenate([u, v]), return_inverse=True)
    parent = np.arange(len(nodes))
    _hook(parent, inverse[: len(u)], inverse[len(u) :])
    return nodes, nodes[parent]


# edges (u[i], v[i]) between record positions, and the largest bucket they came from; after a merge, a forest:
# u the records of shared buckets (sorted), v the lowest record of each one's component
Forest = tuple[np.ndarray, np.ndarray, int]


def band_forest(*parts: list[tuple[np.ndarray, np.ndarray]]) -> Forest:
    """Band task: from every block its (positions, keys) of this task's bands; each bucket (equal keys in one
    band) of two or more records becomes star edges from its first record to the others."""
    us, vs, largest = [], [], 0
    for band in range(len(parts[0]) if parts else 0):
        positions = np.concatenate([part[band][0] for part in parts])
        keys = np.concatenate([part[band][1] for part in parts])
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        positions = positions[order]
        del order
        boundary = np.empty(len(keys), dtype=bool)
        boundary[:1] = True
        np.not_equal(keys[1:], keys[:-1], out=boundary[1:])
        del keys
        starts = np.flatnonzero(boundary)
        sizes = np.diff(np.append(starts, len(positions)))
        shared = sizes > 1
        if not shared.any():
            continue
        largest = max(largest, int(sizes.max()))
        in_shared = np.repeat(shared, sizes)  # the records of buckets of two or more
        first = np.repeat(positions[starts[shared]], sizes[shared] - 1)
        boundary &= in_shared  # the first record of each shared bucket
        others = positions[in_shared & ~boundary]
        us.append(first)
        vs.append(others)
    if not us:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, largest
    return np.concatenate(us), np.concatenate(vs), largest


def merge_forests(count: int, *forests: Forest) -> Forest:
    """Merge task: the components of all the forests' edges, as a forest, by union-find over one array of
    `count` entries (4 bytes a record), the edges read one input at a time."""
    parent = np.arange(count, dtype=np.int32 if count < 2**31 else np.int64)
    touched = np.zeros(count, dtype=bool)
    for u, v, _ in forests:
        _hook(parent, u, v)
        touched[u] = True
        touched[v] = True
    nodes = np.flatnonzero(touched).astype(np.int64)
    return nodes, parent[nodes].astype(np.int64), max((f[2] for f in forests), default=0)


def split_forest(forest: Forest, bounds: Sequence[tuple[int, int]]) -> tuple:
    """(for each [lo, hi) of `bounds` the (nodes, roots) inside it, then the forest's stats)."""
    nodes, roots, largest = forest
    slices = []
    for lo, hi in bounds:
        i, j = np.searchsorted(nodes, [lo, hi])
        slices.append((nodes[i:j], roots[i:j]))
    _, sizes = np.unique(roots, return_counts=True)
    stats = {
        "colliding": len(nodes),
        "components": len(sizes),
        "largest_component": int(sizes.max()) if len(sizes) else 0,
        "largest_bucket": largest,
    }
    return (*slices, stats)


def resolve_task_of(roots: np.ndarray, tasks: int) -> np.ndarray:
    """The resolve task of each component (by its lowest node): a whole component always goes to one task."""
    return (_mix(roots) % np.uint64(tasks)).astype(np.int64)


def scatter_block(members: tuple[np.ndarray, np.ndarray], tasks: int, lo: int, *blocks: np.ndarray) -> tuple:
    """Scatter task: the signature rows [lo, ...) of consecutive blocks; for each resolve task, the (positions,
    signature rows) of the colliding records here that belong to it."""
    nodes, roots = members
    starts = np.cumsum([lo] + [len(block) for block in blocks])
    owner = resolve_task_of(roots, tasks)
    width = blocks[0].shape[1] if blocks else 0
    out = []
    for task in range(tasks):
        mine = nodes[owner == task]
        block_of = np.searchsorted(starts, mine, side="right") - 1
        rows = np.empty((len(mine), width), dtype=blocks[0].dtype if blocks else np.uint32)
        for index, block in enumerate(blocks):
            here = block_of == index
            rows[here] = block[mine[here] - starts[index]]
        out.append((mine, rows))
    return out[0] if tasks == 1 else tuple(out)  # one return value is the value itself, not a 1-tuple


def resolve_in_order(sigs: np.ndarray, settings: DedupSettings) -> dict[int, tuple[int, float]]:
    """`resolve_duplicates` without datasketch's objects (a MinHash per row costs ~4 KB and ~0.2 ms): the same
    bands (`lsh_bands`), a bucket per band holding the rows kept so far under the band's bytes (equal bytes
    exactly when the serial index's byte-swapped key is equal), the same similarity expression (equal values
    counted, divided by num_perm, as `MinHash.jaccard`), the same rule (the lowest confirmed kept row)."""
    bands = lsh_bands(settings)
    tables: list[dict[bytes, list[int]]] = [{} for _ in bands]
    width = float(sigs.shape[1]) if sigs.ndim == 2 else 1.0
    duplicates: dict[int, tuple[int, float]] = {}
    for position in range(len(sigs)):
        row = sigs[position]
        keys = [row[lo:hi].tobytes() for lo, hi in bands]
        candidates: set[int] = set()
        for key, table in zip(keys, tables, strict=True):
            bucket = table.get(key)
            if bucket:
                candidates.update(bucket)
        best = None
        if candidates:
            order = sorted(candidates)
            counts = np.count_nonzero(sigs[order] == row, axis=1).tolist()
            for kept, count in zip(order, counts, strict=True):
                if float(count) / width >= settings.threshold:
                    best = (kept, float(count) / width)
                    break
        if best is None:
            for key, table in zip(keys, tables, strict=True):
                table.setdefault(key, []).append(position)
        else:
            duplicates[position] = best
    return duplicates


def resolve_part(settings: DedupSettings, *parts: tuple[np.ndarray, np.ndarray]) -> tuple:
    """Resolve task: the serial resolution (`resolve_in_order`) over whole components, in record order;
    (duplicate positions, kept positions, similarities) as arrays."""
    positions = np.concatenate([p[0] for p in parts])
    sigs = np.concatenate([p[1] for p in parts])
    order = np.argsort(positions, kind="stable")
    positions, sigs = positions[order], sigs[order]
    found = resolve_in_order(sigs, settings)
    local = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
    kept = np.fromiter((k for k, _ in found.values()), dtype=np.int64, count=len(found))
    similarity = np.fromiter((s for _, s in found.values()), dtype=np.float64, count=len(found))
    return positions[local], positions[kept], similarity


class Tasks(Protocol):
    """Where `resolve_distributed` runs its tasks: `submit` returns handles (Ray object refs, or the values
    themselves) that later submits take as arguments; `gather` turns handles into values."""

    parallelism: int

    def submit(self, fn: Callable, *args, num_returns: int = 1) -> list: ...

    def gather(self, handles: list) -> list: ...

    def wait(self, handles: list) -> None: ...


class InProcessTasks:
    """Every task run at once in this process (tests, and the same code path without a cluster)."""

    parallelism = 1

    def submit(self, fn: Callable, *args, num_returns: int = 1) -> list:
        result = fn(*args)
        return [result] if num_returns == 1 else list(result)

    def gather(self, handles: list) -> list:
        return list(handles)

    def wait(self, handles: list) -> None:
        return None


INLINE_ROWS = 6400  # (position, key) pairs of 16 bytes over Ray's 100 KB limit for values kept by the driver


@dataclass(frozen=True)
class ResolvePlan:
    """How big the distributed resolution's tasks are. The result never depends on it, only the memory per
    task: band tasks hold ~16 bytes × records × bands_per_task / partitions, scatter tasks `scatter_rows`
    signatures, resolve tasks their components (`resolve_rows` colliding records, more only when one
    component is larger)."""

    bands_per_task: int = 1
    band_rows: int = 1 << 23  # keys per band before the key space is split into partitions
    scatter_rows: int = 1 << 18
    resolve_rows: int = 1 << 17
    merge_fan_in: int = 4
    block_rows: tuple[int, int] = (512, 8192)  # records per signature task, at least / at most (before the cap)
    max_signature_tasks: int = 2048

    def signature_rows(self, count: int, parallelism: int) -> int:
        """Records per signature task: about four tasks per worker, within `block_rows`, and never more than
        `max_signature_tasks` tasks. Large blocks keep each band slice a task returns over Ray's inline limit
        (100 KB: 16 bytes a record), so they go to the object store, not into the driver's memory."""
        least, most = self.block_rows
        rows = max(least, min(most, count // max(1, 4 * parallelism)), -(-count // self.max_signature_tasks))
        partitions = self.partitions(count)
        if partitions > 1:  # each of a block's band slices is split again: keep every slice over the limit
            rows = max(rows, min(count, INLINE_ROWS * partitions))
        return rows

    def partitions(self, count: int) -> int:
        """Key partitions per band: band tasks hold at most ~`band_rows` keys each."""
        return max(1, math.ceil(count * max(1, self.bands_per_task) / self.band_rows))


@dataclass
class Submitted:
    """The signature tasks of `resolve_distributed`, submitted and not yet resolved."""

    count: int
    layout: Layout
    bounds: list[tuple[int, int]]
    sig_refs: list
    part_refs: list[list]


def submit_signatures(
    blocks: Sequence[tuple[int, int, Any]],
    make: Callable[[Any], np.ndarray],
    settings: DedupSettings,
    tasks: Tasks,
    plan: ResolvePlan = ResolvePlan(),
) -> Submitted:
    """Submit one signature task per (start, stop, payload) block: `make(payload)` returns the signatures of
    the records at positions start..stop-1, in order."""
    bands = lsh_bands(settings)
    count = sum(stop - start for start, stop, _ in blocks)
    per = max(1, plan.bands_per_task)
    groups = tuple(tuple(bands[i : i + per]) for i in range(0, len(bands), per))
    layout = Layout(groups, plan.partitions(count))
    sig_refs, part_refs = [], []
    returns = 1 + len(groups) * layout.partitions
    for start, _, payload in blocks:
        refs = tasks.submit(signature_block, make, payload, start, layout, num_returns=returns)
        sig_refs.append(refs[0])
        part_refs.append(refs[1:])
    bounds = [(start, stop) for start, stop, _ in blocks]
    return Submitted(count, layout, bounds, sig_refs, part_refs)


def resolve_submitted(
    submitted: Submitted, settings: DedupSettings, tasks: Tasks, plan: ResolvePlan = ResolvePlan()
) -> tuple[dict[int, tuple[int, float]], dict]:
    """Band, merge, scatter and resolve tasks over submitted signature tasks: the serial result, and stats."""
    n_band_tasks = len(submitted.part_refs[0]) if submitted.part_refs else 0
    forests = [tasks.submit(band_forest, *[parts[i] for parts in submitted.part_refs])[0] for i in range(n_band_tasks)]
    merges = 0
    fan = max(2, plan.merge_fan_in)
    while len(forests) > 1 or (forests and merges == 0):  # at least one merge: band edges are not a forest
        forests = [
            tasks.submit(merge_forests, submitted.count, *forests[i : i + fan])[0] for i in range(0, len(forests), fan)
        ]
        merges += len(forests)
    groups = _scatter_groups(submitted.bounds, plan.scatter_rows)
    group_bounds = [(submitted.bounds[g[0]][0], submitted.bounds[g[-1]][1]) for g in groups]
    if not forests:
        return {}, {"colliding": 0}
    split = tasks.submit(split_forest, forests[0], group_bounds, num_returns=len(groups) + 1)
    stats = tasks.gather([split[-1]])[0]
    info = dict(stats, band_tasks=n_band_tasks, partitions=submitted.layout.partitions, merge_tasks=merges)
    info.update(signature_tasks=len(submitted.sig_refs), scatter_tasks=0, resolve_tasks=0)
    if not stats["colliding"]:
        return {}, info
    n_resolve = max(tasks.parallelism, math.ceil(stats["colliding"] / plan.resolve_rows))
    n_resolve = min(n_resolve, stats["components"])
    scattered = [
        tasks.submit(
            scatter_block,
            split[index],
            n_resolve,
            group_bounds[index][0],
            *[submitted.sig_refs[b] for b in group],
            num_returns=n_resolve,
        )
        for index, group in enumerate(groups)
    ]
    resolved = [
        tasks.submit(resolve_part, settings, *[parts[task] for parts in scattered])[0] for task in range(n_resolve)
    ]
    duplicates: dict[int, tuple[int, float]] = {}
    for dup, kept, similarity in tasks.gather(resolved):
        for position, keeper, value in zip(dup.tolist(), kept.tolist(), similarity.tolist(), strict=True):
            duplicates[position] = (keeper, value)
    info.update(scatter_tasks=len(groups), resolve_tasks=n_resolve)
    return dict(sorted(duplicates.items())), info


def _scatter_groups(bounds: list[tuple[int, int]], rows: int) -> list[list[int]]:
    """Consecutive signature blocks, about `rows` rows a group (at least one block each)."""
    groups: list[list[int]] = []
    size = 0
    for index, (lo, hi) in enumerate(bounds):
        if not groups or size + (hi - lo) > rows:
            groups.append([])
            size = 0
        groups[-1].append(index)
        size += hi - lo
    return groups


def resolve_distributed(
    blocks: Sequence[tuple[int, int, Any]],
    make: Callable[[Any], np.ndarray],
    settings: DedupSettings,
    tasks: Tasks,
    plan: ResolvePlan = ResolvePlan(),
) -> tuple[dict[int, tuple[int, float]], dict]:
    """`resolve_duplicates` of all blocks' signatures, computed by tasks that never hold them all (see the
    module docstring): {position: (kept position, similarity)} identical to the serial result, and stats."""
    if not blocks:
        return {}, {"colliding": 0}
    return resolve_submitted(submit_signatures(blocks, make, settings, tasks, plan), settings, tasks, plan)
