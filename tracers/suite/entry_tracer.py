"""Entry tracer: trace a repository's own functions in one thread, and mark each of their calls as an entry.

Every call of a repository function is an *entry*; nested calls into the repository are entries too.
One event stream per test is written once (single pass, no re-tracing), and each entry is a contiguous
range of it: while a frame runs, everything the thread does in repository code happens in that frame
or in frames it called. The host cuts each entry's events out of the stream
(`pipeline.stages.repos.cut`); `tracers.suite.pytest_plugin` documents the stream and starts and stops the
tracer per test.

What counts as the repository's code: files under the run's tree (its copy of the installed tree) whose relative
path matches an `include` glob and no `exclude` glob; conftest.py and test modules (`test_*.py`,
`*_test.py`) never count: test functions are callers, not entries. Entries are plain functions and
methods; generator and coroutine functions, lambdas and comprehensions are traced only inside
another entry. Only the thread that runs the tests is traced.

Budgets: per entry `max_events` and `max_bytes` (an entry past them is cut: exit `never`,
`truncated`); entries per test, per function per test and per function over the run (a test's first entry
excepted: every test that calls the repository yields at least one trace, so the run-wide cap bounds how
much of a hot function is recorded without leaving the later tests of a suite untraced); nesting depth of
open entries; events per test; bytes of the whole output; and a test's share of the run's time
(`start(record_s)`, from the plugin at each test's start): past it the test records nothing more, so a suite
whose recording would outlast its run spreads what it can record over all its tests instead of spending it on
the first ones (`halted = "time_share"`). The stream records an event only while the innermost open entry is
within its budgets, so a test never writes more than its entries need; a test that can record nothing more
(halted) runs on without the hook, at untraced speed, until the next test starts.
The tracer keeps its own references to `sys.settrace` and `sys.gettrace` (bound when this module is
imported, before any conftest runs), so a suite that replaces them cannot stop it from starting; one that
turns tracing off during a test (`sys.settrace(None)`, its own trace function) leaves the hook it finds at
the test's end different from the tracer's, which `stop()` reports. `switching` is true only while the
tracer itself calls settrace, so an audit hook can tell the suite's calls from its own.
Standard library only.
"""

import bisect
import sys
import time
from array import array

from tracers.json_writers import compact
from tracers.reprs.reprcache import FLAT, IMMUTABLE, same
from tracers.reprs.reprcache import signature as signature_of
from tracers.reprs.saferepr import Limits, SafeRepr
from tracers.suite.repo_code import CO_NEWLOCALS, CodeInfo, render_input
from tracers.trace.tracer import unwinds

DEFAULT_BUDGETS = {
    "max_events": 10_000,
    "max_bytes": 8 << 20,
    "max_entries_per_test": 200,
    "max_entries_per_function_per_test": 20,
    "max_entries_per_function": 200,
    "max_entry_depth": 8,
    "max_test_events": 200_000,
    "max_output_bytes": 192 << 20,
}


_settrace = sys.settrace
_gettrace = sys.gettrace


class _Entry:
    __slots__ = ("frame_id", "start", "start_bytes", "info", "input", "code")

    def __init__(self, frame_id, start, start_bytes, info, code):
        self.frame_id = frame_id
        self.start = start
        self.start_bytes = start_bytes
        self.info = info
        self.code = code
        self.input = ""


class EntryTracer:
    """Traces the repository's frames of one thread, test by test, into one stream with entry marks.

    Events come from `sys.settrace`; tracers.suite.entry_monitoring.MonitoringEntryTracer feeds the same hooks from
    `sys.monitoring` (3.12+)."""

    backend = "settrace"
    uses_settrace = True  # the suite's own sys.settrace turns this tracer off (the guard reports it)

    def __init__(self, sink, path_filter, budgets=None, limits=None, replacements=(), abort_types=()):
        self.sink = sink
        self.filter = path_filter
        budgets = dict(DEFAULT_BUDGETS, **(budgets or {}))
        self.max_events = int(budgets["max_events"])
        self.max_bytes = int(budgets["max_bytes"])
        self.max_entries_per_test = int(budgets["max_entries_per_test"])
        self.max_per_function_test = int(budgets["max_entries_per_function_per_test"])
        self.max_per_function = int(budgets["max_entries_per_function"])
        self.max_entry_depth = int(budgets["max_entry_depth"])
        self.max_test_events = int(budgets["max_test_events"])
        self._repr = SafeRepr(limits or Limits())
        self._replacements = [(old, new) for old, new in replacements if old]
        self._abort_types = tuple(abort_types)
        self._codes = {}
        self._return_offsets = {}
        self._lines = {}
        self._source_cache = {}
        self._max_items = (limits or Limits()).max_items
        self._function_counts = {}
        self.n_events = 0
        self.n_entries = 0
        self.tracing = False
        self.switching = False
        self._clock = time.monotonic
        self._record_until = float("inf")
        self._hook = self._on_call  # one bound-method object: compared by identity, never by a user __eq__
        self._reset()

    def _reset(self):
        # frame -> [frame_id, depth, last_event, repr cache, parent_id, entry, recorded, last exception raised,
        # the ordinal after its last recorded event]
        self._frames = {}
        self._entries = []
        self._ordinal = 0
        self._n_bytes = 0
        self._offsets = array("q")
        self._capped_before = array("q")  # per event: capped values in the test's events before it
        self._n_capped = 0
        self._event_capped = 0
        self._next_frame = 0
        self._test_entries = 0
        self._test_function_counts = {}
        self.halted = None
        self._detached = None  # after a halt took the hook off: whether it was intact then

    # -- test boundaries ----------------------------------------------------------------------------
    def _set_hook(self, hook):
        self.switching = True
        try:
            _settrace(hook)
        finally:
            self.switching = False

    def start(self, record_s=None):
        """Trace a test; it records for `record_s` seconds at most (None: no time limit of its own)."""
        self._reset()
        self._record_until = float("inf") if record_s is None else self._clock() + record_s
        self.tracing = True
        self._set_hook(self._hook)

    def intact(self):
        """Whether the hook installed by `start()` is still this thread's trace function (when the tracer took it
        off itself after a halt: whether it was then)."""
        return self._detached if self._detached is not None else _gettrace() is self._hook

    def stop(self):
        """Stop tracing the test; entries still open are closed as cut (exit never). Returns `intact()`."""
        intact = self.intact()
        self._set_hook(None)
        self.tracing = False
        reason = self.halted or ("tracer_disabled" if not intact else "test_ended")
        while self._entries:
            entry = self._entries.pop()
            self._write_entry(entry, "never", True, reason)
        self._frames = {}
        return intact

    def close(self):
        """The end of the run (the sys.monitoring tracer gives its tools back)."""

    def halt(self, reason):
        """Record nothing more in this test (a budget, or the test is being aborted; any thread may call it)."""
        if self.halted is None:
            self.halted = reason

    def _halt_here(self, reason):
        """`halt`, from the tracer's own callbacks in the traced thread: the hook also comes off until the next
        test (settrace's; sys.monitoring's per-test events, as at a test's end), so the rest of the test runs
        at untraced speed instead of paying a callback per call and line for events that would be dropped."""
        self.halt(reason)
        if self.tracing and self._detached is None:
            try:
                intact = self.intact()
                self._set_hook(None)
                self._detached = intact
            except BaseException:  # near the recursion limit: the hook stays, and records nothing
                pass

    # -- hooks ----------------------------------------------------------------------------------------
    def _on_call(self, frame, event, arg):
        try:
            code = frame.f_code
            info = self._codes.get(code, False)
            if info is False:
                info = self._codes[code] = self._code_info(code)
            if info is None:
                return None
            opens = info.can_enter and self._may_open(code)
            recording = self._recording()
            if not opens and not recording:
                return None
            parent_id, depth = self._parent_of(frame)
            state = self._frames.get(frame)
            if state is None:
                state = [self._next_frame, depth, None, {}, parent_id, None, False, None, 0]
                self._next_frame += 1
                self._frames[frame] = state
            else:  # a generator resumed: its caller may have changed
                state[1] = depth
                state[4] = parent_id
            entry = None
            if opens:
                entry = _Entry(state[0], self._ordinal, self._n_bytes, info, code)
                self._entries.append(entry)
                state[5] = entry
                self._count(code)
                recording = self._recording()
            if recording:
                pairs = self._emit(frame, state, info, "call", None)
                if entry is not None and pairs is not None:
                    entry.input = render_input(info, pairs)
            else:
                state[2] = "call"
                state[6] = False
            return self._on_event
        except self._abort_types:
            raise
        except BaseException as error:
            return self._fail(error)

    def _on_event(self, frame, event, arg):
        try:
            state = self._frames.get(frame)
            if state is None:
                return None
            if event == "return" and (
                state[2] == "exception" or (arg is None and state[7] is not None and self._unwinds(frame))
            ):
                # It leaves with its exception. When other code ran after that exception event (a `with`'s
                # __exit__, a `finally`, a bare `raise`; a finalizer as its stack unwinds), the exception is
                # repeated, so that the frame's trace ends with its exception node.
                if state[2] != "exception" or (state[6] and state[8] != self._ordinal):
                    self._end_with_exception(frame, state)
                self._frame_end(frame, state, "error")
                return None
            if event == "exception":
                arg = state[7] = arg[1] if arg[1] is not None else arg[0]
            if self._recording():
                self._emit(frame, state, self._codes[frame.f_code], event, arg)
            else:
                state[2] = event
                state[6] = False
            if event == "return":
                self._frame_end(frame, state, "normal")
                return None
            return self._on_event
        except self._abort_types:
            raise
        except BaseException as error:
            return self._fail(error)

    def _end_with_exception(self, frame, state):
        if self._recording():
            self._emit(frame, state, self._codes[frame.f_code], "exception", state[7])
        else:
            state[6] = False  # not recorded: the entry is cut where its recording stopped

    def _unwinds(self, frame):
        return unwinds(frame, frame.f_code, self._return_offsets)

    # -- bookkeeping -----------------------------------------------------------------------------------
    def _code_info(self, code):
        path = self.filter.relpath(code.co_filename)
        if path is None or code.co_name == "<module>" or not code.co_flags & CO_NEWLOCALS:
            return None
        return CodeInfo(code, path)

    def _may_open(self, code):
        return (
            self.halted is None
            and len(self._entries) < self.max_entry_depth
            and self._test_entries < self.max_entries_per_test
            and self._test_function_counts.get(code, 0) < self.max_per_function_test
            and (self._test_entries == 0 or self._function_counts.get(code, 0) < self.max_per_function)
        )

    def _count(self, code):
        self._test_entries += 1
        self.n_entries += 1
        self._test_function_counts[code] = self._test_function_counts.get(code, 0) + 1
        self._function_counts[code] = self._function_counts.get(code, 0) + 1

    def _recording(self):
        if self.halted is not None or not self._entries:
            return False
        top = self._entries[-1]
        return self._ordinal - top.start < self.max_events and self._n_bytes - top.start_bytes < self.max_bytes

    def _parent_of(self, frame):
        caller = frame.f_back
        frames = self._frames
        while caller is not None:
            state = frames.get(caller)
            if state is not None:
                return state[0], state[1] + 1
            caller = caller.f_back
        return None, 0

    def _frame_end(self, frame, state, exit_):
        info = self._codes.get(frame.f_code)
        if info is None or not info.suspends:
            self._frames.pop(frame, None)  # a generator keeps its id across resumes
        entry = state[5]
        if entry is None:
            return
        state[5] = None
        if entry in self._entries:
            while self._entries:
                top = self._entries.pop()
                if top is entry:
                    break
                self._write_entry(top, "never", True, "tracer_error")
        truncated = not state[6]
        self._write_entry(
            entry, "never" if truncated else exit_, truncated, self._cut_reason(entry) if truncated else None
        )

    def _cut_reason(self, entry):
        if self.halted is not None:
            return self.halted
        count = self._ordinal - entry.start
        return "max_events" if count >= self.max_events else "max_bytes"

    def _write_entry(self, entry, exit_, truncated, reason):
        end = self._ordinal
        limit = min(end, entry.start + self.max_events)
        by_bytes = bisect.bisect_left(self._offsets, entry.start_bytes + self.max_bytes, entry.start, end)
        n = max(0, min(limit, by_bytes) - entry.start)
        if n == 0:
            return  # nothing of it was recorded (halted before its call)
        last = entry.start + n
        through = self._capped_before[last] if last < len(self._capped_before) else self._n_capped
        info = entry.info
        self.sink.obj(
            type="entry",
            frame=entry.frame_id,
            start=entry.start,
            n=n,
            end=end,
            exit=exit_,
            truncated=truncated,
            reason=reason,
            path=info.path,
            qualname=info.qualname,
            firstlineno=info.firstlineno,
            input=entry.input,
            capped=through - self._capped_before[entry.start],
        )

    # -- recording ---------------------------------------------------------------------------------------
    def _emit(self, frame, state, info, event, arg):
        """Write one event line (the same JSON `json.dumps` gives, assembled from cached pieces)."""
        lineno = frame.f_lineno
        self._event_capped = 0
        fragments, pairs = self._locals(frame, state[3])
        parent = state[4]
        line = '[%d,"%s",%d,%s,%d,%d,%s,%s,[%s],%s]' % (
            self._ordinal,
            event,
            state[0],
            "null" if parent is None else parent,
            state[1],
            lineno,
            info.qualname_json,
            self._source_json(frame.f_code.co_filename, lineno),
            ",".join(fragments),
            "null" if event in ("call", "line") else compact(self._text(arg)),
        )
        if not self.sink.write(line):
            self._halt_here("max_output_bytes")
            state[2] = event
            state[6] = False
            return None
        self._offsets.append(self._n_bytes)
        self._capped_before.append(self._n_capped)
        self._n_capped += self._event_capped
        self._ordinal += 1
        self._n_bytes += len(line) + 1
        self.n_events += 1
        state[2] = event
        state[6] = True
        state[8] = self._ordinal
        if self._ordinal >= self.max_test_events:
            self._halt_here("max_test_events")
        elif self._clock() > self._record_until:
            self._halt_here("time_share")
        return pairs

    def _text(self, value):
        text = self._repr(value)
        self._event_capped += self._repr.capped
        if "/" in text:
            for old, new in self._replacements:
                text = text.replace(old, new)
        return text

    def _locals(self, frame, cache):
        """([JSON of [name, repr]], [(name, repr)]) in frame order.

        A local keeps its repr (and its JSON) while it is the same object and, for a flat builtin
        container, while the objects it shows are the same immutable ones: re-rendering lists at every
        line is what tracing spends most of its time on otherwise."""
        fragments, pairs = [], []
        max_items = self._max_items
        for name, value in frame.f_locals.items():  # a function frame's: an exact dict
            hit = cache.get(name)
            kind = id(type(value))
            if kind in IMMUTABLE:
                if hit is not None and hit[0] is value:
                    fragments.append(hit[2])
                    pairs.append((name, hit[1]))
                    self._event_capped += hit[4]
                    continue
                signature = None
            elif kind in FLAT:
                signature = signature_of(value, type(value), max_items)
                if signature is not None and hit is not None and hit[0] is value and same(signature, hit[3]):
                    fragments.append(hit[2])
                    pairs.append((name, hit[1]))
                    self._event_capped += hit[4]
                    continue
            else:
                signature = None
            text = self._text(value)
            fragment = compact([name, text])
            if kind in IMMUTABLE or signature is not None:
                cache[name] = (value, text, fragment, signature, self._repr.capped)
            fragments.append(fragment)
            pairs.append((name, text))
        return fragments, pairs

    def _source_json(self, filename, lineno):
        key = (filename, lineno)
        text = self._source_cache.get(key)
        if text is None:
            text = self._source_cache[key] = compact(self._source(filename, lineno))
        return text

    def _source(self, filename, lineno):
        lines = self._lines.get(filename)
        if lines is None:
            try:
                with open(filename, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
            except OSError:
                lines = []
            self._lines[filename] = lines
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    def _fail(self, error):
        self._halt_here(
            "recursion_limit" if isinstance(error, RecursionError) else "tracer_error:" + type(error).__name__
        )
        return None
