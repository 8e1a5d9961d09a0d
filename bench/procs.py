"""Peak memory of a job's processes, read from /proc (Linux): the driver, and each Ray worker with its descendants.

`watch(process, kill_mb)` polls every `interval` seconds until `process` (a `subprocess.Popen` of the driver)
exits. A Ray worker is a descendant of the driver whose command line is Ray's worker (`ray::IDLE`, `ray::TASK`
process titles, `default_worker.py`; not Ray's `ray::...Agent` processes, not the raylet); its *tree* is the
worker and every process below it (a sandbox, pytest). Per sample the largest worker tree's RSS is taken; peaks
are over samples, and a worker's own peak also from its kernel high-water mark (`VmHWM`), which no poll can
miss. When a worker tree passes `kill_mb`, every process below the driver and the driver itself are killed (by
pid, SIGKILL) and the result says so.
"""

import os
import signal
import time
from dataclasses import dataclass, field

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Peaks:
    driver_rss: int = 0  # bytes
    worker_rss: int = 0  # the largest single Ray worker process (VmHWM included)
    worker_tree_rss: int = 0  # the largest worker tree, summed per sample
    all_rss: int = 0  # the driver and every process below it, summed per sample
    workers_seen: set[int] = field(default_factory=set)
    samples: int = 0
    killed: bool = False
    killed_at_s: float | None = None
    killed_tree_rss: int = 0


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return False
    argv = cmdline.split(b"\0")
    if argv[0].startswith(b"ray::"):  # a worker's title is ray::IDLE or ray::TASK; Ray's agents are not workers
        return not argv[0].endswith(b"Agent")
    # before it sets its title: python [-u] .../default_worker.py (or setup_worker.py, which execs it). The
    # raylet names default_worker.py in its own arguments, so only the script python runs counts.
    script = next((arg for arg in argv[1:4] if arg.endswith(b".py")), b"")
    return script.endswith((b"/default_worker.py", b"/setup_worker.py"))


def watch(process, kill_mb: float | None = None, interval: float = 0.1) -> Peaks:
    """Sample until `process` exits; kill its processes when a worker tree passes `kill_mb`."""
    peaks = Peaks()
    started = time.monotonic()
    while process.poll() is None:
        children = _children()
        below = _descendants(process.pid, children)
        sizes = {pid: _rss(pid) for pid in below}
        peaks.driver_rss = max(peaks.driver_rss, _rss(process.pid), _hwm(process.pid))
        peaks.all_rss = max(peaks.all_rss, _rss(process.pid) + sum(sizes.values()))
        trees = []
        for pid in below:
            if _is_worker(pid):
                peaks.workers_seen.add(pid)
                peaks.worker_rss = max(peaks.worker_rss, sizes[pid], _hwm(pid))
                trees.append(sizes[pid] + sum(sizes.get(child, _rss(child)) for child in _descendants(pid, children)))
        tree = max(trees, default=0)
        peaks.worker_tree_rss = max(peaks.worker_tree_rss, tree)
        peaks.samples += 1
        if kill_mb is not None and tree > kill_mb * (1 << 20):
            peaks.killed, peaks.killed_at_s, peaks.killed_tree_rss = True, time.monotonic() - started, tree
            kill_tree(process.pid)
            process.wait()
            break
        time.sleep(interval)
    return peaks


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every process below it (children first found, then the root)."""
    for target in [*_descendants(pid, _children()), pid]:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
