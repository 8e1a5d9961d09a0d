"""Memory as a resource: a unit's Ray worker is bounded by its kind's `task_memory_mb` (or --task-memory-mb).

`MemoryWatch` runs in the Ray task beside the unit: a daemon thread samples the worker's resident memory
(RSS, /proc/self/statm) every INTERVAL_S and keeps its peak. Past the limit it stops the unit by raising
`_Stop` in the unit's thread (`PyThreadState_SetAsyncExc`, delivered at the next bytecode); the task then
fails with `MemoryLimitExceeded`, which names the unit, the memory it reached and the limit. C code never sees
an asynchronous exception: a unit still running GRACE_S later is ended with `os._exit`, after leaving a note
(`on_exit`) that lets the driver tell that death from any other.

Only the worker process is counted, not the sandboxed processes a unit starts (each has its own limits,
`SandboxLimits.memory_bytes`). The driver (`pipeline.engine.orchestrate.run_units`) asks Ray for the same
memory per task (`memory=`), so Ray places no more units on a node than fit, and resubmits a unit stopped for
memory at most `oom_retries` times before recording it failed with what to change.
"""

import ctypes
import gc
import importlib
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MB = 1 << 20
OOM_RETRIES = 2  # resubmissions of a unit stopped for memory
INTERVAL_S = 0.05
GRACE_S = 5.0
EXIT_CODE = 75  # os._exit status of a worker ended for memory

DEFAULT_TASK_MEMORY_MB = 2048  # a kind that declares none (JobKind.task_memory_mb)

_ARMED, _FIRED, _DISARMED = "armed", "fired", "disarmed"


@dataclass(frozen=True)
class UnitMemory:
    """A unit's memory: its Ray task asks for `mb` and its worker is stopped past it; `smaller` says how
    the kind's units are made smaller (an option), for the failure's advice."""

    mb: int = DEFAULT_TASK_MEMORY_MB
    smaller: str = ""


class MemoryLimitExceeded(Exception):
    """A unit's worker passed its memory limit; the task failed with this (Ray carries it to the driver)."""

    def __init__(self, unit_id: str, reached_bytes: int, limit_bytes: int):
        self.unit_id, self.reached_bytes, self.limit_bytes = unit_id, reached_bytes, limit_bytes
        super().__init__(
            f"unit {unit_id} reached {reached_bytes / MB:.0f} MB of memory, over its limit of "
            f"{limit_bytes / MB:.0f} MB (--task-memory-mb)"
        )

    def __reduce__(self):
        return type(self), (self.unit_id, self.reached_bytes, self.limit_bytes)


class _Stop(BaseException):
    """Raised asynchronously in the unit's thread; a BaseException, so a unit's `except Exception` lets it by."""


def check_memory_settings(task_memory_mb: Any, oom_retries: Any) -> None:
    """A ValueError naming the option, before Ray starts."""
    if task_memory_mb is not None and (type(task_memory_mb) is not int or task_memory_mb < 64):
        raise ValueError(f"--task-memory-mb must be an int >= 64 (MB per unit's Ray task), got {task_memory_mb!r}")
    if type(oom_retries) is not int or oom_retries < 0:
        raise ValueError(f"--oom-retries must be an int >= 0, got {oom_retries!r}")


def advice(hint: str = "") -> str:
    """What a user changes when a unit fails for memory."""
    smaller = f"make units smaller ({hint})" if hint else "make units smaller"
    return f"give each unit more memory with a larger --task-memory-mb, or {smaller}"


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """This process's resident memory; 0 where it cannot be read (the watch then never fires)."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:  # no /proc (macOS): psutil, which ray[default] installs
        return importlib.import_module("psutil").Process().memory_info().rss
    except Exception:  # noqa: BLE001 (no psutil, or a platform it cannot read: no measurement)
        return 0


def _set_async_exc(ident: int, exc: type[BaseException] | None) -> None:
    """Raise `exc` in thread `ident` at its next bytecode; None takes back one not yet delivered."""
    argument = ctypes.py_object(exc) if exc is not None else None  # None passes NULL: clears
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), argument)


class MemoryWatch:
    """Bounds the RSS of this process while armed; see the module doc.

    Arm and disarm from the thread that runs the unit. Once `disarm` returns, no `_Stop` can arrive: the
    watch sends at most once, under `_lock`, and only while armed; `disarm` marks it disarmed under the same
    lock and then takes back a stop sent but not yet delivered. `_lock` is re-entrant because a stop can land
    while the unit's thread holds it (it never blocks the watch: the watch takes it only before sending).
    """

    def __init__(
        self,
        limit_bytes: int,
        unit_id: str,
        *,
        interval_s: float = INTERVAL_S,
        grace_s: float = GRACE_S,
        on_exit: Callable[[int], None] | None = None,
    ):
        self.limit_bytes, self.unit_id = limit_bytes, unit_id
        self.interval_s, self.grace_s, self.on_exit = interval_s, grace_s, on_exit
        self.peak_bytes = rss_bytes()
        self.reached_bytes = 0
        self.fired = False
        self._state = _DISARMED
        self._lock = threading.RLock()
        self._done = threading.Event()
        self._target: int | None = None
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        self._target = threading.get_ident()
        with self._lock:
            self._state = _ARMED
        self._thread = threading.Thread(target=self._watch, name=f"memory-watch {self.unit_id}", daemon=True)
        self._thread.start()

    def disarm(self) -> None:
        """Stop watching; idempotent, and safe to call again after a stop landed inside it."""
        with self._lock:
            sent = self._state == _FIRED
            self._state = _DISARMED
        if sent and self._target is not None:
            _set_async_exc(self._target, None)
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def sample(self) -> int:
        rss = rss_bytes()
        self.peak_bytes = max(self.peak_bytes, rss)
        return rss

    def _watch(self) -> None:
        while not self._done.wait(self.interval_s):
            rss = self.sample()
            if rss <= self.limit_bytes:
                continue
            with self._lock:
                if self._state != _ARMED:
                    return
                self.reached_bytes, self.fired, self._state = rss, True, _FIRED
                assert self._target is not None
                _set_async_exc(self._target, _Stop)
            if self._done.wait(self.grace_s):
                return
            # Still running: the unit is in C code, which never sees the stop. End the worker; Ray reports it dead.
            self.reached_bytes = max(self.reached_bytes, self.sample())
            try:
                if self.on_exit is not None:
                    self.on_exit(self.reached_bytes)
                print(
                    f"tracegen: {MemoryLimitExceeded(self.unit_id, self.reached_bytes, self.limit_bytes)}; "
                    "ending the worker (the unit did not stop)",
                    file=sys.stderr,
                    flush=True,
                )
            finally:
                os._exit(EXIT_CODE)


_current: MemoryWatch | None = None  # the watch of the unit this process runs


def unit_peak_rss() -> int | None:
    """The peak RSS of the running unit's worker so far (for its completion record); None outside a watch."""
    watch = _current
    return None if watch is None else max(watch.peak_bytes, watch.sample())


def call_within_memory(
    fn: Callable[[Any], Any],
    item: Any,
    limit_bytes: int,
    unit_id: str,
    *,
    on_exit: Callable[[int], None] | None = None,
    interval_s: float = INTERVAL_S,
    grace_s: float = GRACE_S,
) -> Any:
    """fn(item) with this process's memory bounded by `limit_bytes`; MemoryLimitExceeded when it passes it.

    A unit that finished before its stop landed keeps its result (its completion record is written).
    """
    global _current
    watch = MemoryWatch(limit_bytes, unit_id, interval_s=interval_s, grace_s=grace_s, on_exit=on_exit)
    finished, result = False, None
    try:
        _current = watch
        watch.arm()
        try:
            result = fn(item)
            finished = True
        finally:
            watch.disarm()
    except _Stop:
        watch.disarm()  # a stop that landed inside disarm left it half done
    except BaseException:
        watch.disarm()
        if not watch.fired:  # the unit's own error
            raise
        # the stop turned into another exception on its way out (a handler or a cleanup that raised): memory
    finally:
        _current = None
    if finished:
        return result
    # Outside the handler: the stop's traceback (and the frames holding the unit's memory) is gone.
    gc.collect()
    _trim()
    raise MemoryLimitExceeded(unit_id, watch.reached_bytes, limit_bytes)


def _trim() -> None:
    """Give freed heap back to the system (glibc), so the next unit on this worker starts small."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
