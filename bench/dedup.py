"""Dedup throughput: tracegen's MinHash LSH vs datasketch used with its defaults, on the same documents.

    .venv/bin/python bench/dedup.py [--docs 10000] [--repeat 3]

Documents are (code, entry, input) built from examples/functions.jsonl (see `documents`).

Variants, each timed `--repeat` times side by side (best kept; noise only ever adds time):
  * tracegen — `pipeline.stages.dedup.signatures` (normalise, shingle, `MinHash.update_batch`, pinned seed and
    scheme) then `resolve_duplicates` (MinHashLSH at the configured threshold, first of a group kept);
  * datasketch defaults — `MinHash()` and `update` once per shingle, the way its README shows, on the
    same shingle sets (tracegen's normalisation, timed separately and added), then the same LSH resolution
    (the signatures come out bit-identical, so the resolution is the same work and is timed once per round
    for each and the best kept).
One core, in this process: in a job the signatures run in Ray tasks (one per 512 documents) and only the
resolution runs on the driver. Prints a table and whether both variants drop the same documents.

    .venv/bin/python bench/dedup.py --distributed [--records 1000000] [--workers 2] [--sample 4000] [--serial]

The distributed resolution (`resolve_distributed`: Ray tasks by band, then per component set) on `--records`
records, against the serial `resolve_duplicates` on the driver (with `--serial`; the same records, and both
results compared). Computing 10^6 datasketch signatures would take ~1,000 core-seconds, so the resolution is
measured apart from them: its records are planted signatures (see `planted_block`: random rows for distinct
functions, and copies of earlier rows, often of copies, with 0-40 of the 128 values replaced, estimated
similarity 1.0 down to ~0.69; a few popular rows copied many times), generated inside the signature tasks, and
the signature step's rate is measured on `--sample` generated documents (`documents`). Every task reports its
seconds and its peak resident memory (VmHWM, reset when the task starts) and, sampled every 5 ms, its private
memory (RssAnon) and the object-store pages it mapped (RssShmem); the resolution runs a second time over the
same signature tasks with every task in a new worker (`max_calls=1`), so that a task's memory is its own.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

import datasketch
import numpy as np
from datasketch import MinHash, MinHashLSH

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from variants import rename  # noqa: E402

from pipeline.stages.code_tokens import normalised_tokens  # noqa: E402
from pipeline.stages.dedup import DedupSettings, resolve_duplicates, shingles, signature  # noqa: E402


def documents(count: int) -> list[tuple[str, str, str]]:
    """`count` documents cycling over the examples, pass by pass: pass 0 the examples as they are, then in
    turn copies with every name their functions bind renamed (bench/variants.py: duplicates after
    normalisation), copies with one statement added (near duplicates) and copies called with another input
    (distinct: the input is in every shingle)."""
    with open(ROOT / "examples" / "functions.jsonl", encoding="utf-8") as handle:
        examples = [json.loads(line) for line in handle if line.strip()]
    docs = []
    for i in range(count):
        example = examples[i % len(examples)]
        code, entry, value = example["code"], example.get("entry", "f"), example["input"]
        round_, kind = divmod(i // len(examples), 3)
        if i < len(examples):
            pass
        elif kind == 0:
            code = rename(code, f"_r{round_}")
        elif kind == 1:
            head, _, body = code.partition("\n")
            indent = body[: len(body) - len(body.lstrip())] or "    "
            code = f"{head}\n{indent}_unused_{round_} = {round_}\n{body}"
        else:
            value = f"{value}, {round_ + 1}" if value else str(round_ + 1)
        docs.append((code, entry, value))
    return docs


def datasketch_defaults(shingle_sets: list[set[str]]) -> list[np.ndarray]:
    """MinHash() with its defaults, `update` per shingle."""
    out = []
    for shingle_set in shingle_sets:
        minhash = MinHash()
        for shingle in shingle_set:
            minhash.update(shingle.encode())
        out.append(minhash.hashvalues)
    return out


def resolve_with_defaults(sigs: list[np.ndarray], threshold: float) -> dict[int, int]:
    """The same first-of-group resolution over an index of default MinHashes."""
    lsh = MinHashLSH(threshold=threshold)
    hashes = [MinHash(hashvalues=values, scheme="affine32") for values in sigs]
    duplicates = {}
    for position, minhash in enumerate(hashes):
        kept = [int(key) for key in lsh.query(minhash) if minhash.jaccard(hashes[int(key)]) >= threshold]
        if kept:
            duplicates[position] = min(kept)
        else:
            lsh.insert(str(position), minhash)
    return duplicates


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


# ---- --distributed ---------------------------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def _h(i: int, salt: int) -> int:
    """splitmix64 of (i, salt): the planted corpus is a pure function of the position."""
    z = (i * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03 + 0x632BE59BD9B4E019) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _source(i: int) -> tuple[int, int]:
    """(the earlier record that i copies, values replaced), or (-1, 0) for a distinct record."""
    draw = _h(i, 0) / 2**64
    if i > 0 and draw < 0.30:  # a near copy of a recent record (itself often a copy: chains)
        return i - 1 - _h(i, 1) % min(i, 2000), _h(i, 2) % 41
    if i >= 50 and draw < 0.36:  # one of 50 popular functions (groups of ~1,200 at 10^6 records)
        return _h(i, 1) % 50, _h(i, 2) % 31
    if i > 0 and draw < 0.40:  # a copy of any earlier record
        return _h(i, 1) % i, _h(i, 2) % 41
    return -1, 0


def _planted_row(i: int, num_perm: int, memo: dict) -> np.ndarray:
    row = memo.get(i)
    if row is None:
        source, changed = _source(i)
        if source < 0:
            row = _base_rows(np.array([i]), num_perm)[0]
        else:
            row = _planted_row(source, num_perm, memo).copy()
            for j in range(changed):
                row[_h(i, 3 + 2 * j) % num_perm] = _h(i, 4 + 2 * j) & 0xFFFFFFFF
        memo[i] = row
    return row


def _base_rows(positions: np.ndarray, num_perm: int) -> np.ndarray:
    """Random-looking rows, one per position (distinct functions share no band)."""
    from pipeline.stages.dedup_distributed import _mix

    cells = positions[:, None].astype(np.int64) * num_perm + np.arange(num_perm, dtype=np.int64)[None, :]
    return (_mix(cells + (1 << 40)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def planted_block(span: tuple[int, int], num_perm: int = 128) -> np.ndarray:
    """The planted signatures of positions [lo, hi) (the same rows whichever block computes them)."""
    lo, hi = span
    rows = _base_rows(np.arange(lo, hi), num_perm)
    memo: dict[int, np.ndarray] = {}
    for i in range(lo, hi):
        if _source(i)[0] >= 0:
            rows[i - lo] = _planted_row(i, num_perm, memo)
        else:
            memo[i] = rows[i - lo]
    return rows


def _status() -> dict[str, int]:
    """VmHWM, VmRSS, RssAnon (private), RssShmem (object-store pages mapped) of this process, in KiB."""
    values = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(("VmHWM", "VmRSS", "RssAnon", "RssShmem")):
                values[line.split(":")[0]] = int(line.split()[1])
    return values


def _peak_kb() -> tuple[int, int]:
    """(VmHWM, VmRSS) of this process in KiB."""
    values = _status()
    return values["VmHWM"], values["VmRSS"]


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:  # "5": the peak RSS starts again from the current RSS
        handle.write("5")


class Measured:
    """A task function that writes its stage, seconds and memory to a file under `folder`: the peak RSS
    (VmHWM, reset when the task starts) and, sampled every 5 ms, the peaks of its private memory (RssAnon)
    and of the object-store pages it has mapped (RssShmem, shared with the store and every other reader)."""

    def __init__(self, fn, folder: str):
        self.fn, self.folder = fn, folder

    def __call__(self, *args):
        import threading

        _reset_peak()
        peaks = _status()
        done = threading.Event()

        def sample():
            while not done.wait(0.005):
                now = _status()
                peaks["RssAnon"] = max(peaks["RssAnon"], now["RssAnon"])
                peaks["RssShmem"] = max(peaks["RssShmem"], now["RssShmem"])

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        result = self.fn(*args)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        end = _status()
        line = {
            "stage": self.fn.__name__,
            "seconds": seconds,
            "peak_kb": end["VmHWM"],
            "anon_kb": max(peaks["RssAnon"], end["RssAnon"]),
            "shmem_kb": max(peaks["RssShmem"], end["RssShmem"]),
        }
        with open(os.path.join(self.folder, f"{os.getpid()}-{uuid.uuid4().hex}.json"), "w") as handle:
            json.dump(line, handle)
        return result


class MeasuredTasks:
    """RayTasks whose every task is `Measured`."""

    def __init__(self, inner, folder: str):
        self.inner, self.folder = inner, folder
        self.parallelism = inner.parallelism

    def submit(self, fn, *args, num_returns: int = 1) -> list:
        return self.inner.submit(Measured(fn, self.folder), *args, num_returns=num_returns)

    def gather(self, handles: list) -> list:
        return self.inner.gather(handles)

    def wait(self, handles: list) -> None:
        self.inner.wait(handles)


class FreshWorkerTasks(MeasuredTasks):
    """Measured tasks each in a new worker process (Ray's `max_calls=1`): a task's peak RSS is then its own,
    not raised by what an earlier task in the same worker left allocated."""

    def __init__(self, folder: str, parallelism: int):
        import ray

        from pipeline.engine.orchestrate import _apply

        self.folder, self.parallelism = folder, parallelism
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_calls=1)(_apply)

    def submit(self, fn, *args, num_returns: int = 1) -> list:
        refs = self._remote.options(num_returns=num_returns).remote(Measured(fn, self.folder), *args)
        return [refs] if num_returns == 1 else list(refs)

    def gather(self, handles: list) -> list:
        return self._ray.get(list(handles))

    def wait(self, handles: list) -> None:
        self._ray.wait(list(handles), num_returns=len(handles), fetch_local=False)


def task_table(folder: str) -> list[dict]:
    rows: dict[str, dict] = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as handle:
            line = json.load(handle)
        row = rows.setdefault(line["stage"], {"stage": line["stage"], "tasks": 0, "seconds": 0.0, "peak_kb": 0})
        row["tasks"] += 1
        row["seconds"] += line["seconds"]
        row["peak_kb"] = max(row["peak_kb"], line["peak_kb"])
        row["max_seconds"] = max(row.get("max_seconds", 0.0), line["seconds"])
        row["anon_kb"] = max(row.get("anon_kb", 0), line["anon_kb"])
        row["shmem_kb"] = max(row.get("shmem_kb", 0), line["shmem_kb"])
    return list(rows.values())


def in_child(fn):
    """(fn(), seconds, MB its peak RSS rose above the RSS it started from), run in a forked child so that no
    memory this process freed earlier hides its allocations."""
    import pickle

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _reset_peak()
        before_kb = _peak_kb()[1]
        started = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - started
        payload = pickle.dumps((result, seconds, (_peak_kb()[0] - before_kb) / 1024))
        with os.fdopen(write, "wb") as handle:
            handle.write(payload)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        payload = handle.read()
    os.waitpid(pid, 0)
    return pickle.loads(payload)


def idle_task() -> int:
    """A task that only imports what the stage tasks import: the baseline of a new worker."""
    import pipeline.stages.dedup_distributed  # noqa: F401

    return 0


def distributed_main(args) -> None:
    import functools

    import ray

    from pipeline.engine.orchestrate import RayTasks, start_ray
    from pipeline.stages.dedup import signature_matrix
    from pipeline.stages.dedup_distributed import ResolvePlan, resolve_in_order, resolve_submitted, submit_signatures

    settings = DedupSettings()
    n = args.records

    # the signature step's rate, on generated documents, one core in this process
    sample = documents(args.sample)
    started = time.perf_counter()
    signature_matrix(sample, settings)
    signature_rate = len(sample) / (time.perf_counter() - started)

    start_ray(None, args.workers)
    folder, fresh_folder = tempfile.mkdtemp(prefix="dedup-bench-"), tempfile.mkdtemp(prefix="dedup-bench-fresh-")
    tasks = MeasuredTasks(RayTasks(), folder)
    plan = ResolvePlan()
    batch = plan.signature_rows(n, tasks.parallelism)
    blocks = [(lo, min(lo + batch, n), (lo, min(lo + batch, n))) for lo in range(0, n, batch)]
    make = functools.partial(planted_block, num_perm=settings.num_perm)

    _reset_peak()
    driver_start_kb = _peak_kb()[1]
    started = time.perf_counter()
    submitted = submit_signatures(blocks, make, settings, tasks, plan)
    tasks.wait(submitted.sig_refs + [ref for refs in submitted.part_refs for ref in refs])
    generated = time.perf_counter() - started
    started = time.perf_counter()
    found, info = resolve_submitted(submitted, settings, tasks, plan)
    resolved = time.perf_counter() - started
    driver_peak_kb = _peak_kb()[0]
    # the same resolution again, every task in a new worker, for the peak memory of each task alone
    again, _ = resolve_submitted(submitted, settings, FreshWorkerTasks(fresh_folder, tasks.parallelism), plan)
    assert again == found
    idle_folder = tempfile.mkdtemp(prefix="dedup-bench-idle-")
    idle = FreshWorkerTasks(idle_folder, tasks.parallelism)
    idle.gather([idle.submit(idle_task)[0] for _ in range(2)])
    idle_row = task_table(idle_folder)[0]
    idle_kb, idle_anon_kb = idle_row["peak_kb"], idle_row["anon_kb"]
    del submitted
    table = task_table(folder)
    fresh = {row["stage"]: row for row in task_table(fresh_folder)}

    serial_line = ""
    if args.serial:
        sigs = planted_block((0, n), settings.num_perm)
        expected, serial_seconds, serial_peak_mb = in_child(lambda: resolve_duplicates(list(sigs), settings))
        lean, lean_seconds, lean_peak_mb = in_child(lambda: resolve_in_order(sigs, settings))
        same = expected == found == lean
        lean_line = (
            f"\n| serial `resolve_in_order` (the resolve tasks' loop) over every record on the driver | 1 | "
            f"{lean_seconds:.1f} | {lean_seconds:.1f} | {n / lean_seconds:,.0f} | "
            f"{lean_peak_mb + sigs.nbytes / 2**20:,.0f} (index {lean_peak_mb:,.0f} + signatures "
            f"{sigs.nbytes / 2**20:,.0f}) | | |"
        )
        serial_line = (
            f"| **serial `resolve_duplicates` on the driver** | 1 | {serial_seconds:.1f} | {serial_seconds:.1f} | "
            f"{n / serial_seconds:,.0f} | {serial_peak_mb + sigs.nbytes / 2**20:,.0f} (index {serial_peak_mb:,.0f} "
            f"+ signatures {sigs.nbytes / 2**20:,.0f}) | | |"
        ) + lean_line
        print(f"serial results identical to the distributed one: {same} ({len(expected)} duplicates)")
        if not same:
            raise SystemExit("the distributed result differs from the serial one")

    print(
        f"{n:,} records (planted signatures), {len(found):,} duplicates; {info['colliding']:,} records in a shared "
        f"bucket, {info['components']:,} components, largest {info['largest_component']:,}, largest bucket "
        f"{info['largest_bucket']:,}; {args.workers} workers; num_perm {settings.num_perm}, threshold "
        f"{settings.threshold}; datasketch {datasketch.__version__}, ray {ray.__version__}, python "
        f"{platform.python_version()}"
    )
    print(
        f"signature step (datasketch, tracegen's normalisation): {signature_rate:,.0f} docs/s on one core "
        f"({len(sample):,} generated documents)"
    )
    print(
        f"resolution: {resolved:.1f} s wall = {n / resolved:,.0f} docs/s (planted rows generated in the signature "
        f"tasks beforehand: {generated:.1f} s); driver peak {driver_peak_kb / 1024:,.0f} MB "
        f"(from {driver_start_kb / 1024:,.0f} MB)"
    )
    order = ["signature_block", "band_forest", "merge_forests", "split_forest", "scatter_block", "resolve_part"]
    print(
        f"an idle worker (new, the stage's imports done): RSS {idle_kb / 1024:,.0f} MB, of which private "
        f"{idle_anon_kb / 1024:,.0f} MB"
    )
    print(
        "| stage | tasks | task-seconds | longest task s | records/s per core | peak RSS of a task, MB | "
        "its private memory above an idle worker's, MB | object-store pages it mapped, MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in sorted(table, key=lambda r: order.index(r["stage"])):
        memory = fresh.get(row["stage"], row)  # signature tasks: measured in reused workers
        print(
            f"| {row['stage']} | {row['tasks']} | {row['seconds']:.1f} | {row['max_seconds']:.1f} | "
            f"{n / max(row['seconds'], 1e-9):,.0f} | {memory['peak_kb'] / 1024:,.0f} | "
            f"{(memory['anon_kb'] - idle_anon_kb) / 1024:,.0f} | {memory['shmem_kb'] / 1024:,.0f} |"
        )
    if serial_line:
        print(serial_line)
    print(json.dumps({"info": info, "plan": plan.__dict__, "signature_rows": batch}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000, help="documents to deduplicate")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best time of each phase is kept")
    parser.add_argument("--distributed", action="store_true", help="the distributed resolution (see above)")
    parser.add_argument("--records", type=int, default=1_000_000, help="--distributed: planted records")
    parser.add_argument("--workers", type=int, default=2, help="--distributed: Ray workers")
    parser.add_argument("--sample", type=int, default=4000, help="--distributed: documents for the signature rate")
    parser.add_argument("--serial", action="store_true", help="--distributed: also the serial resolution")
    args = parser.parse_args()
    if args.distributed:
        distributed_main(args)
        return

    settings = DedupSettings()
    docs = documents(args.docs)
    best = {}

    def keep(name, seconds):
        best[name] = min(best.get(name, float("inf")), seconds)

    for _ in range(args.repeat):
        seconds, shingle_sets = timed(
            lambda: [shingles(normalised_tokens(code), entry, value, settings.shingle) for code, entry, value in docs]
        )
        keep("shingle", seconds)
        seconds, ours = timed(lambda: [signature(doc, settings) for doc in docs])
        keep("ours_signatures", seconds)
        seconds, theirs = timed(datasketch_defaults, shingle_sets)
        keep("theirs_minhash", seconds)
        seconds, ours_dups = timed(resolve_duplicates, ours, settings)
        keep("resolve", seconds)
        seconds, theirs_dups = timed(resolve_with_defaults, theirs, settings.threshold)
        keep("resolve", seconds)

    n = len(docs)
    identical = all((a == b).all() for a, b in zip(ours, theirs, strict=True))
    ours_minhash = best["ours_signatures"] - best["shingle"]
    ours_total = best["ours_signatures"] + best["resolve"]
    theirs_total = best["shingle"] + best["theirs_minhash"] + best["resolve"]
    mean_shingles = sum(len(s) for s in shingle_sets) / n
    rows = [
        ("normalise + shingle (tracegen's; the same sets for both)", best["shingle"], None),
        ("MinHash: datasketch `MinHash()` + `update` per shingle", best["theirs_minhash"], None),
        ("MinHash: tracegen `update_batch` (affine32, seed 1)", ours_minhash, best["theirs_minhash"] / ours_minhash),
        ("LSH resolve (MinHashLSH, first of a group kept; the same for both)", best["resolve"], None),
        ("**end to end: datasketch defaults**", theirs_total, 1.0),
        ("**end to end: tracegen**", ours_total, theirs_total / ours_total),
    ]
    print(
        f"{n} documents, {mean_shingles:.0f} shingles each on average; num_perm {settings.num_perm}, "
        f"threshold {settings.threshold}, shingle {settings.shingle}; datasketch {datasketch.__version__}, "
        f"numpy {np.__version__}, python {platform.python_version()}; one core, best of {args.repeat}"
    )
    print("| phase | seconds | µs/doc | docs/s | speed-up |\n|---|---|---|---|---|")
    for name, seconds, ratio in rows:
        print(
            f"| {name} | {seconds:.3f} | {seconds / n * 1e6:,.0f} | {n / seconds:,.0f} | "
            f"{'' if ratio is None else f'{ratio:.2f}x'} |"
        )
    same = set(ours_dups) == set(theirs_dups)
    print(
        f"signatures bit-identical to datasketch defaults: {identical}; duplicates dropped: tracegen "
        f"{len(ours_dups)}, datasketch defaults {len(theirs_dups)}, same documents: {same}"
    )


if __name__ == "__main__":
    main()
