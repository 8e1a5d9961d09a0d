"""The distributed LSH resolution (tasks by band, `resolve_distributed`) gives exactly the serial
`resolve_duplicates` result, kept/dropped and (kept position, similarity) alike, on generated corpora with
planted near-duplicates: pairs, exact copies, groups around one function, chains whose links are each similar
to the previous one but drift away from the first, and far variants that must survive. The corpus is checked
to contain what makes a wrong resolution show (chains through a dropped record, groups), and mutated
resolutions are checked to differ from the serial one on it, so the comparison can fail."""

import random

import numpy as np
import pytest

import pipeline.kinds.functions as functions_kind
import pipeline.stages.dedup_distributed as dedup_distributed
from pipeline.kinds.functions import find_duplicates
from pipeline.sources.function_records import FunctionRecord
from pipeline.stages.dedup import DedupSettings, resolve_duplicates, signature_matrix
from pipeline.stages.dedup_distributed import (
    InProcessTasks,
    ResolvePlan,
    components,
    lsh_bands,
    resolve_distributed,
    resolve_in_order,
)

SETTINGS = DedupSettings()
OPS = ["+", "-", "*", "//", "%", "^", "|", "&"]
NAMES = ["acc", "x", "y", "z", "total", "tmp"]

# small tasks, so every stage splits: key partitions, several merge levels, scatter groups and resolve tasks
SMALL = ResolvePlan(
    bands_per_task=2, band_rows=600, scatter_rows=150, resolve_rows=60, merge_fan_in=2, block_rows=(16, 64)
)
PLANS = [ResolvePlan(), SMALL, ResolvePlan(bands_per_task=9, band_rows=10**9, scatter_rows=10**9, resolve_rows=1)]


def base_function(rng: random.Random) -> list[str]:
    """A random function body as statements (each its own line), with literals that make it unique."""
    lines = ["def f(xs):", "    acc = 0", "    for x in xs:"]
    for _ in range(rng.randint(9, 13)):
        target, source = rng.choice(NAMES), rng.choice(NAMES)
        lines.append(f"        {target} = {source} {rng.choice(OPS)} {rng.randint(2, 10**6)}")
    lines.append("    return acc")
    return lines


def edit(lines: list[str], rng: random.Random) -> list[str]:
    """One statement's literal replaced (about 5 of ~70 shingles change: estimated similarity ~0.85)."""
    out = list(lines)
    index = rng.randrange(3, len(out) - 1)
    head, _, _ = out[index].rpartition(" ")
    out[index] = f"{head} {rng.randint(2, 10**6)}"
    return out


def renamed(lines: list[str]) -> list[str]:
    """Every variable renamed: the same normalised tokens, so the same signature."""
    table = {name: f"{name}_copy" for name in [*NAMES, "xs"]}
    return [" ".join(table.get(word, word) for word in line.split(" ")) for line in lines]


def corpus(seed: int, bases: int = 90) -> list[tuple[str, str, str]]:
    """(code, entry, input) documents: per base function one planted pattern, all shuffled together (so a
    variant often comes before the function it varies)."""
    rng = random.Random(seed)
    docs: list[tuple[list[str], str]] = []
    for index in range(bases):
        lines = base_function(rng)
        pattern = index % 6
        docs.append((lines, "[1, 2, 3]"))
        if pattern == 0:  # a pair and an exact copy (renamed)
            docs += [(edit(lines, rng), "[1, 2, 3]"), (renamed(lines), "[1, 2, 3]")]
        elif pattern == 1:  # a group: variants each one edit away from the base
            docs += [(edit(lines, rng), "[1, 2, 3]") for _ in range(rng.randint(3, 7))]
        elif pattern == 2:  # a chain: each link one edit away from the previous one
            link = lines
            for _ in range(rng.randint(3, 7)):
                link = edit(link, rng)
                docs.append((link, "[1, 2, 3]"))
        elif pattern == 3:  # far variants (three edits) and the same code on another input: distinct
            docs += [(edit(edit(edit(lines, rng), rng), rng), "[1, 2, 3]"), (lines, "[4, 5]")]
        elif pattern == 4:  # a chain with branches
            link = lines
            for _ in range(rng.randint(2, 4)):
                link = edit(link, rng)
                docs += [(link, "[1, 2, 3]"), (edit(link, rng), "[1, 2, 3]")]
        # pattern 5: the base alone
    rng.shuffle(docs)
    return [("\n".join(lines) + "\n", "f", input_text) for lines, input_text in docs]


def serial(sigs: np.ndarray) -> dict[int, tuple[int, float]]:
    return resolve_duplicates(list(sigs), SETTINGS)


def distributed(sigs: np.ndarray, plan: ResolvePlan, block: int = 37) -> tuple[dict, dict]:
    blocks = [
        (start, min(start + block, len(sigs)), sigs[start : start + block]) for start in range(0, len(sigs), block)
    ]
    return resolve_distributed(blocks, np.asarray, SETTINGS, InProcessTasks(), plan)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.count_nonzero(a == b)) / float(len(a))


def confirmed_before(sigs: np.ndarray, p: int) -> list[int]:
    """Positions q < p that share a band with p (equal values over the band's whole range) and whose
    estimated similarity reaches the threshold, whatever their own fate."""
    earlier, row = sigs[:p], sigs[p]
    collide = np.zeros(p, dtype=bool)
    for lo, hi in lsh_bands(SETTINGS):
        collide |= (earlier[:, lo:hi] == row[lo:hi]).all(axis=1)
    similar = np.count_nonzero(earlier == row, axis=1) / len(row) >= SETTINGS.threshold
    return np.flatnonzero(collide & similar).tolist()


@pytest.fixture(scope="module")
def corpus_sigs() -> np.ndarray:
    return signature_matrix(corpus(seed=13), SETTINGS)


def test_the_corpus_has_what_tells_a_wrong_resolution_apart(corpus_sigs):
    """Dropped records at similarity 1 and below it, groups of 3+ on one kept record, and kept records that
    collide with an earlier, similar record that was itself dropped (so only kept records may be candidates)."""
    found = serial(corpus_sigs)
    similarities = [value for _, value in found.values()]
    assert 1.0 in similarities and min(similarities) < 0.95
    per_kept: dict[int, int] = {}
    for kept, _ in found.values():
        per_kept[kept] = per_kept.get(kept, 0) + 1
    assert max(per_kept.values()) >= 3
    through_dropped = [
        p
        for p in range(len(corpus_sigs))
        if p not in found and any(q in found for q in confirmed_before(corpus_sigs, p))
    ]
    assert len(through_dropped) >= 3
    assert 0.1 * len(corpus_sigs) < len(found) < 0.7 * len(corpus_sigs)


@pytest.mark.parametrize("plan", PLANS, ids=["default", "small-tasks", "one-band-task"])
def test_distributed_resolution_equals_the_serial_one(corpus_sigs, plan):
    expected = serial(corpus_sigs)
    found, info = distributed(corpus_sigs, plan)
    assert found == expected  # same dropped positions, same kept position and similarity for each
    assert info["colliding"] < len(corpus_sigs)  # records in no shared bucket never reach a resolve task


def test_the_resolve_tasks_loop_is_resolve_duplicates(corpus_sigs):
    """`resolve_in_order` (what resolve tasks run) against the datasketch index, on everything at once."""
    assert resolve_in_order(corpus_sigs, SETTINGS) == serial(corpus_sigs)
    planted = planted_signatures(3000, seed=9)
    assert resolve_in_order(planted, SETTINGS) == serial(planted)
    other = DedupSettings(num_perm=64, threshold=0.6)
    assert resolve_in_order(planted[:, :64], other) == resolve_duplicates(list(planted[:, :64]), other)


def test_the_same_on_other_corpora_and_block_sizes():
    for seed, block in [(1, 1), (2, 64), (3, 1000)]:
        sigs = signature_matrix(corpus(seed, bases=40), SETTINGS)
        assert distributed(sigs, SMALL, block)[0] == serial(sigs)


def test_a_component_split_across_resolve_tasks_gives_another_result(corpus_sigs, monkeypatch):
    """The mutation the design rules out: records of one component resolved apart."""
    monkeypatch.setattr(dedup_distributed, "resolve_task_of", lambda roots, tasks: np.arange(len(roots)) % tasks)
    assert distributed(corpus_sigs, SMALL)[0] != serial(corpus_sigs)


def test_a_missing_band_or_a_resolution_blind_to_kept_status_gives_another_result(corpus_sigs, monkeypatch):
    expected = serial(corpus_sigs)
    # candidates of any status (not only kept records): chains through a dropped record come out wrong
    blind = {}
    for p in range(len(corpus_sigs)):
        confirmed = confirmed_before(corpus_sigs, p)
        if confirmed:
            blind[p] = (confirmed[0], similarity(corpus_sigs[p], corpus_sigs[confirmed[0]]))
    assert blind != expected
    # the band tasks see one band fewer than the serial index
    bands = lsh_bands(SETTINGS)
    monkeypatch.setattr(dedup_distributed, "lsh_bands", lambda settings: bands[1:])
    assert distributed(corpus_sigs, SMALL)[0] != expected


def planted_signatures(count: int, seed: int) -> np.ndarray:
    """Signatures without documents, for size: random rows, and copies of earlier rows (often of copies, so
    chains) with 0..40 of 128 values replaced (estimated similarity 1.0 down to ~0.7), a few popular rows copied
    many times (large groups and buckets)."""
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 2**32, size=(count, SETTINGS.num_perm), dtype=np.uint64).astype(np.uint32)
    for i in range(1, count):
        draw = rng.random()
        if draw < 0.35:
            source = int(rng.integers(max(0, i - 500), i))
        elif draw < 0.42:
            source = int(rng.integers(0, min(i, 5)))
        else:
            continue
        sigs[i] = sigs[source]
        changed = rng.integers(0, SETTINGS.num_perm, size=int(rng.integers(0, 41)))
        sigs[i, changed] = rng.integers(0, 2**32, size=len(changed), dtype=np.uint64).astype(np.uint32)
    return sigs


def test_planted_signatures_at_a_larger_size():
    sigs = planted_signatures(6000, seed=5)
    expected = serial(sigs)
    found, info = distributed(sigs, ResolvePlan(band_rows=4000, scatter_rows=700, resolve_rows=400), block=256)
    assert found == expected
    assert info["partitions"] > 1 and info["scatter_tasks"] > 1 and info["resolve_tasks"] > 1
    assert info["largest_component"] >= 20


def test_components_match_a_plain_union_find():
    rng = random.Random(3)
    for _ in range(30):
        n = rng.randint(1, 60)
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 80))]
        parent = list(range(n))

        def find(x, parent=parent):
            while parent[x] != x:
                x = parent[x]
            return x

        for a, b in edges:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
        u = np.array([a for a, _ in edges], dtype=np.int64)
        v = np.array([b for _, b in edges], dtype=np.int64)
        nodes, roots = components(u, v)
        touched = sorted({x for edge in edges for x in edge})
        assert nodes.tolist() == touched
        members: dict[int, list[int]] = {}
        for node in touched:
            members.setdefault(find(node), []).append(node)
        assert roots.tolist() == [min(members[find(node)]) for node in touched]


def test_the_job_path_through_ray_equals_the_driver_path(ray_local, monkeypatch):
    """find_duplicates (the trace-functions and refresh jobs' dedup) with the resolution as Ray tasks and on
    the driver: the same kept records and the same `duplicates` rows."""
    docs = corpus(seed=21, bases=60)
    records = [FunctionRecord(f"r{i}", code, text, entry, f"mem:{i}") for i, (code, entry, text) in enumerate(docs)]
    monkeypatch.setattr(functions_kind, "DEDUP_PLAN", SMALL)
    monkeypatch.setattr(functions_kind, "DISTRIBUTED_DEDUP_FROM", 1)
    kept_ray, rows_ray, counters_ray = find_duplicates(records, DedupSettings())
    monkeypatch.setattr(functions_kind, "DISTRIBUTED_DEDUP_FROM", 10**9)
    kept_driver, rows_driver, counters_driver = find_duplicates(records, DedupSettings())
    assert rows_ray == rows_driver and len(rows_ray) > 20
    assert [r.id for r in kept_ray] == [r.id for r in kept_driver]
    assert counters_ray.dropped == counters_driver.dropped
