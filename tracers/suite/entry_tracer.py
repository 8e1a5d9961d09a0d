"""Entry tracer: trace a repository's own functions in one thread, and mark each of their calls as an entry.

Every call of a repository function is an *entry*; nested calls into the repository are entries too.
One event stream per test is written once (single pass, no re-tracing), and each entry is a contiguous
range of it: while a frame runs, everything the thread does in repository code happens in that frame
or in frames it called. A generator function's entry is one such range per activation of its frame: its
first call up to its first yield, then each resume up to the next yield, until the frame ends (a return,
or an exception: an error, a GeneratorExit from `close()`). While it is suspended its entry is off the stack
of open entries and others open and close as usual; a resume puts it back on top, and one still suspended
when the test ends is cut (`test_ended`). The host cuts each entry's events out of the stream
(`pipeline.stages.repos.cut`); `tracers.suite.pytest_plugin` documents the stream and starts and stops the
tracer per test.

What counts as the repository's code: files under the run's tree (its copy of the installed tree) whose relative
path matches an `include` glob and no `exclude` glob; conftest.py and test modules (`test_*.py`,
`*_test.py`) never count: test functions are callers, not entries. Entries are plain functions, methods and
generator functions; coroutines, async generators, lambdas and comprehensions are traced only inside
another entry. Only the thread that runs the tests is traced.

Budgets: per entry `max_events` and `max_bytes`, over all of a generator's activations (an entry past them
is cut: exit `never`, `truncated`); entries per test, per function per test and per function over the run (a
test's first entry excepted: every test that calls the repository yields at least one trace, so the run-wide
cap bounds how much of a hot function is recorded without leaving the later tests of a suite untraced);
nesting depth of open entries; events per test; bytes of the whole output; and a test's share of the run's
time (`start(record_s)`, from the plugin at each test's start): past it the test records nothing more, so a
suite whose recording would outlast its run spreads what it can record over all its tests instead of spending
it on the first ones (`halted = "time_share"`). The stream records an event only while an open entry is
within its budgets (the innermost one, unless a resumed generator's entry has spent more than one under it),
so a test never writes more than its entries need; a test that can record nothing more (halted) runs on
without the hook, at untraced speed, until the next test starts.
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
    """An entry call. `start`: the ordinal of its frame's current (or last) activation's first event;
    `ranges`: the (start, end) of its earlier activations (a generator's) while its budget had room;
    `end`: where it was last suspended (None until its first yield); `base` and `base_bytes`: where its
    budgets count from, its call's ordinal and byte offset moved on, at each resume, past what others recorded
    while it was suspended."""

    __slots__ = ("frame_id", "start", "ranges", "end", "base", "base_bytes", "info", "input", "code")

    def __init__(self, frame_id, start, start_bytes, info, code):
        self.frame_id = frame_id
        self.start = self.base = start
        self.base_bytes = start_bytes
        self.ranges = []
        self.end = None
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
        # the ordinal after its last recorded event, its code's yield offsets (a generator's; else None), the
        # offset of its last exception event]
        self._frames = {}
        self._entries = []
        self._suspended = {}  # entries of suspended generators (a dict as an ordered set), oldest suspension first
        self._resumed = 0  # entries on the stack that a resume put back
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
        for entry in self._suspended:  # a generator not run to its end
            self._write_entry(entry, "never", True, reason, active=False)
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
            state = self._frames.get(frame)
            resumed = state[5] if state is not None else None  # a generator's entry, suspended at its last yield
            if resumed is not None:
                self._resume(resumed)
            # a generator's frame is called once, at the start of its code; its other `call` events are resumes
            opens = info.can_enter and (info.yields is None or frame.f_lasti == info.start) and self._may_open(code)
            recording = self._recording()
            if not opens and not recording and resumed is None:
                return None
            parent_id, depth = self._parent_of(frame)
            if state is None:
                state = [self._next_frame, depth, None, {}, parent_id, None, False, None, 0, info.yields, -1]
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
                if state[9] is None
                else self._generator_unwinds(frame, state, arg)
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
                state[10] = frame.f_lasti
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

    def _generator_unwinds(self, frame, state, arg):
        """Whether a generator frame's `return` event is it leaving with its exception. Unlike other frames, it
        may return or yield right after an exception event (a `yield from` that ends with StopIteration): it
        leaves with its exception where it unwinds, or at the yield where that exception was thrown in
        (`throw()`, `close()`)."""
        return (
            arg is None
            and state[7] is not None
            and (self._unwinds(frame) or (state[2] == "exception" and state[10] == frame.f_lasti))
        )

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
        if self._ordinal - top.base < self.max_events and self._n_bytes - top.base_bytes < self.max_bytes:
            return True
        # An entry has spent no more of its budgets than those under it, unless a resume put it back: one under a
        # resumed generator's entry may still have room, and its events must all be there.
        return (
            self._resumed > 0
            and len(self._entries) > 1
            and any(
                self._ordinal - entry.base < self.max_events and self._n_bytes - entry.base_bytes < self.max_bytes
                for entry in self._entries
            )
        )

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
        """The frame returned (`normal`) or left with its exception (`error`); a generator's yield only
        suspends it."""
        yields = state[9]
        if yields is not None and exit_ == "normal" and frame.f_lasti in yields:
            self._suspend(state)
            return
        info = self._codes.get(frame.f_code)
        if yields is not None or info is None or not info.suspends:
            self._frames.pop(frame, None)  # other suspending code (coroutines) keeps its frame id whenever it ends
        entry = state[5]
        if entry is None:
            return
        state[5] = None
        self._pop_to(entry)
        truncated = not state[6]
        self._write_entry(
            entry, "never" if truncated else exit_, truncated, self._cut_reason(entry) if truncated else None
        )

    def _pop_to(self, entry):
        """Take `entry` off the stack of open entries; those still above it (their frames left unseen) end as
        cut. False when it is not on the stack."""
        if entry not in self._entries:
            return False
        while True:
            top = self._entries.pop()
            if top.end is not None:
                self._resumed -= 1
            if top is entry:
                return True
            self._write_entry(top, "never", True, "tracer_error")

    def _suspend(self, state):
        """A generator's frame yielded: it keeps its frame id, and its entry waits off the stack for the next
        resume, its activation so far one more of its ranges while its budgets had room at the range's start."""
        entry = state[5]
        if entry is None:
            return
        if not self._pop_to(entry):
            state[5] = None
            return
        if entry.start - entry.base < self.max_events and self._offset(entry.start) - entry.base_bytes < self.max_bytes:
            entry.ranges.append((entry.start, self._ordinal))
        entry.end = self._ordinal
        self._suspended[entry] = None

    def _resume(self, entry):
        """A suspended generator's frame is resumed: its entry goes back on top of the stack, and its budgets
        leave out what others recorded since its yield."""
        del self._suspended[entry]
        self._entries.append(entry)
        self._resumed += 1
        entry.base += self._ordinal - entry.end
        entry.base_bytes += self._n_bytes - self._offset(entry.end)
        entry.start = self._ordinal

    def _offset(self, ordinal):
        """The byte offset of event `ordinal` in the test's stream (the next event's, for the next ordinal)."""
        return self._offsets[ordinal] if ordinal < self._ordinal else self._n_bytes

    def _cut_reason(self, entry):
        if self.halted is not None:
            return self.halted
        count = self._ordinal - entry.base
        return "max_events" if count >= self.max_events else "max_bytes"

    def _write_entry(self, entry, exit_, truncated, reason, active=True):
        """Write the entry's mark: its activations' events within its budgets (`active`: its frame is running,
        its current activation the last; else it is a generator suspended at its last yield)."""
        end = self._ordinal if active else entry.end
        recorded = self._recorded(entry.ranges + [(entry.start, end)] if active else entry.ranges)
        if not recorded:
            return  # nothing of it was recorded (halted before its call)
        n = capped = 0
        for start, count in recorded:
            n += count
            capped += self._capped_at(start + count) - self._capped_at(start)
        info = entry.info
        fields = dict(
            type="entry",
            frame=entry.frame_id,
            start=recorded[0][0],
            n=n,
            end=end,
            exit=exit_,
            truncated=truncated,
            reason=reason,
            path=info.path,
            qualname=info.qualname,
            firstlineno=info.firstlineno,
            input=entry.input,
            capped=capped,
        )
        if len(recorded) > 1:
            fields["ranges"] = [list(pair) for pair in recorded]
        self.sink.obj(**fields)

    def _recorded(self, ranges):
        """[(start, n)] of the events of `ranges` ([start, end) each, in order) within the entry's budgets, which
        count every range's events: a prefix of their concatenation, as (start, n) of the ranges it touches."""
        out, events, size = [], 0, 0
        for start, end in ranges:
            first = self._offset(start)
            limit = min(end, start + self.max_events - events)
            stop = min(limit, bisect.bisect_left(self._offsets, first + self.max_bytes - size, start, end))
            if stop > start:
                out.append((start, stop - start))
            if stop < end:
                break
            events += end - start
            size += self._offset(end) - first
        return out

    def _capped_at(self, ordinal):
        """How many capped values the test's events before `ordinal` hold."""
        return self._capped_before[ordinal] if ordinal < len(self._capped_before) else self._n_capped

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
