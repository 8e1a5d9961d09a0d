"""pytest plugin: run the entry tracer test by test and write one stream with each test's outcome.

`tracers.suite.entry_tracer` records the events and marks the entries; this plugin starts and stops it
around each test and adds the test boundaries, outcomes and collection errors. Output is JSON lines,
each written whole:

    {"type": "header", "tracer_version", "tracer_backend", "python", "budgets"}
    {"type": "test", "nodeid"}                       a test starts; event ordinals restart at 0
    [ordinal, event, frame_id, parent_frame_id, depth, lineno, function, source, locals, arg]
    {"type": "entry", "frame", "start", "n", "end", "exit", "truncated", "reason", "path", "qualname",
     "firstlineno", "input", "capped", "ranges"?}    written when the entry's frame ends (or its test)
    {"type": "test_end", "nodeid", "outcome", "message"}
    {"type": "collected", "count", "seconds"}       the tests collected, seconds since the runner started
    {"type": "collect_error", "nodeid", "message"}
    {"type": "violation", "kind", "nodeid", "detail"}
    {"type": "end", "exitstatus", "reason", "stopped"}   stopped: "max_output_bytes" or null

Event arrays follow `tracers.trace.tracer.EVENT_FIELDS`, with frame ids, parents and depths of the whole
test's stream; the host renumbers them per entry. Entry `start` is the ordinal of its call event and
`n` the number of events that belong to it (its budget-limited prefix of `start..end`), `capped` how many of
their values a repr cap cut. A generator function's entry whose events are more than one range of the stream
(its frame yielded and was resumed) also has `ranges`, `[[start, n], ...]`: one per activation (its call or
a resume, up to its yield or its end), in order, apart, together its budget-limited `n` events, the last
ending at or before `end`, where the frame was last active. Other entries have no `ranges` key.
`progress_fd` (optional) gets a `tracers.guard.watchdog` progress line at each test's start and end; `deselect`
names tests not to run (an earlier run of the same suite ran them). A test at whose end the tracer's
hook is no longer installed (the suite called `sys.settrace`; with the sys.monitoring backend, a tool found
changed), or a run in which `sys.settrace` or `threading.settrace` was replaced (sys.monitoring: a call aimed
at the tracer's tools was refused), gets a `tracer_disabled` / `tracer_patched` violation.
When the events fill the output budget (Sink), the test in flight still ends with its `test_end` and the
session stops after it (`end.stopped`): the host runs the tests left in a fresh sandbox with a fresh budget.
A run given its wall clock (`wall_s`) gives each test a share of the time left to record in: TIME_SHARE of
(time left ÷ tests left), so a suite too slow to record whole within its run is recorded test by test, each a
part, rather than its first tests whole and the rest not at all (the tracer's `time_share` halt).

The suite runs as its own CI runs it, except where that would stop it early or fail it only because tracing
is slow, in the untraced parity run and the traced run alike (so their outcomes still compare):
`pytest_configure` turns stepwise (`--sw`, `--sw-skip`, `--sw-reset`) and the debugger (`--pdb`, `--trace`:
it would read a closed stdin and quit the session) off; once collection is done, when the suite has imported
Hypothesis, its settings are relaxed (`relax_hypothesis`): no deadline and no `too_slow` health check, as a
profile derived from the suite's current one and on each collected test, whose settings were fixed when it
was decorated. A deadline a test set itself (one that is no registered profile's) stays.
Standard library only; pytest is not imported (the hooks are plain methods).
"""

import os
import sys
import threading
import time

from tracers.guard import watchdog
from tracers.json_writers import compact
from tracers.suite.entry_tracer import DEFAULT_BUDGETS
from tracers.trace.backends import SETTRACE, tracer_version

MESSAGE_CHARS = 2000
# By module name: in the runner's sealed copy (tracers/guard/seal.py) `sys` and `threading` are snapshots, and only
# the modules themselves (sys.modules) show what the suite replaced.
_HOOKS = (("sys", "settrace", sys.settrace), ("threading", "settrace", threading.settrace))
# Options of the repository's that would end the run early (config.option names).
STOPPERS = ("stepwise", "stepwise_skip", "stepwise_reset", "usepdb", "trace")
# Of a test's fair part of the time left (time left ÷ tests left), what it may spend recording; the rest is
# for running the rest of the test under the tracer, which costs more than untraced even when it records nothing.
TIME_SHARE = 0.5
HYPOTHESIS_PROFILE = "tracegen-untimed"


class Sink:
    """Line writer with two byte caps. Event lines stop at `max_bytes` (`full` is set then); the objects that
    give the stream its shape (test boundaries, entries, collection errors, violations, the end) may use
    `reserve` bytes more, so a run whose events filled the budget still says how each test ended. Past
    both, nothing more is written."""

    def __init__(self, handle, max_bytes, reserve=0):
        self._handle = handle
        self.max_bytes = max_bytes
        self.limit = max_bytes + reserve
        self.n_bytes = 0
        self.full = False

    def write(self, line):
        if self.full:
            return False
        if self.n_bytes + len(line) + 1 > self.max_bytes:
            self.full = True
            return False
        return self._put(line)

    def obj(self, **fields):
        line = compact(fields)
        if self.n_bytes + len(line) + 1 > self.limit:
            self.full = True
            return False
        return self._put(line)

    def _put(self, line):
        try:
            self._handle.write(line + "\n")
        except (OSError, ValueError):
            self.full = True
            self.limit = self.n_bytes  # a broken handle takes nothing more
            return False
        self.n_bytes += len(line) + 1
        return True

    def flush(self):
        try:
            self._handle.flush()
        except (OSError, ValueError):
            self.full = True
            self.limit = self.n_bytes


def _tail(text, limit=MESSAGE_CHARS):
    text = str(text)
    return text if len(text) <= limit else "..." + text[-limit:]


class TracePlugin:
    """pytest hooks: trace each test (setup, call, teardown) and record outcomes and collection errors.

    `guard` (optional) is told when a test starts and ends, so it can enforce per-test limits.
    """

    def __init__(self, tracer, sink, guard=None, trace=True, progress_fd=None, deselect=(), wall_s=None):
        self.tracer = tracer
        self.progress_fd = progress_fd
        self.deselect = frozenset(deselect)
        self._patched_reported = False
        self.trace = trace  # False: only outcomes are recorded (the benchmark's untraced baseline)
        self.sink = sink
        self.guard = guard
        self.main_pid = os.getpid()
        self.current = None
        self._outcome = None
        self._message = None
        self.n_tests = 0
        self.n_failed = 0
        self.ended = False
        self.started = time.monotonic()
        self.deadline = None if wall_s is None else self.started + float(wall_s)
        self.n_collected = None
        self.session = None
        self.stopped = None  # why the run stopped before its last test (the output budget), else None

    def _in_child(self):
        """A process forked by a test that came back into pytest: it must not run more tests."""
        if os.getpid() != self.main_pid:
            os._exit(0)

    def _progress(self, kind, nodeid):
        if self.progress_fd is not None:
            watchdog.report(self.progress_fd, kind, nodeid)

    def _check_hooks(self):
        """Report (once) a replaced sys.settrace / threading.settrace; the tracer uses its own references."""
        if self._patched_reported or self.guard is None or not self.trace or not self.tracer.uses_settrace:
            return
        replaced = [
            "%s.settrace" % module for module, name, real in _HOOKS if getattr(sys.modules[module], name) is not real
        ]
        if replaced:
            self._patched_reported = True
            self.guard.violation("tracer_patched", "the suite replaced %s" % " and ".join(replaced))

    def pytest_configure(self, config):
        for name in STOPPERS:
            if getattr(config.option, name, False):
                setattr(config.option, name, False)

    def pytest_collection_modifyitems(self, session, config, items):
        if self.deselect:
            kept = [item for item in items if item.nodeid not in self.deselect]
            config.hook.pytest_deselected(items=[item for item in items if item.nodeid in self.deselect])
            items[:] = kept

    def pytest_runtest_logstart(self, nodeid, location):
        self._in_child()
        self.current = nodeid
        self._outcome, self._message = "passed", None
        self.sink.obj(type="test", nodeid=nodeid)
        self.sink.flush()  # a run that ends inside this test still names it
        self._progress(b"S", nodeid)
        if self.guard is not None:
            self.guard.test_started(nodeid)
            self._check_hooks()
        if self.sink.full:
            self.tracer.halt("max_output_bytes")
        if self.trace:
            self.tracer.start(self._record_s())

    def _record_s(self):
        """How long the test starting now may record: its share of the time left, or None (no deadline)."""
        if self.deadline is None or self.n_collected is None:
            return None
        left_s = max(0.0, self.deadline - time.monotonic())
        return TIME_SHARE * left_s / max(1, self.n_collected - self.n_tests)

    def pytest_runtest_makereport(self, item, call):
        self._in_child()

    def pytest_runtest_logreport(self, report):
        self._in_child()
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            if self._outcome in ("passed", "skipped"):
                self._outcome = outcome
                self._message = _tail(getattr(report, "longreprtext", ""))
        elif report.skipped and self._outcome == "passed":
            self._outcome = "skipped"

    def pytest_runtest_logfinish(self, nodeid, location):
        self._in_child()
        if self.tracer.tracing and not self.tracer.stop() and self.guard is not None:
            self.guard.tracer_disabled("the tracer's hook was gone at the end of the test")
        if self.guard is not None:
            self.guard.test_finished(nodeid)
        self._progress(b"E", nodeid)
        self.n_tests += 1
        self.n_failed += self._outcome in ("failed", "error")
        self.sink.obj(type="test_end", nodeid=nodeid, outcome=self._outcome, message=self._message)
        self.sink.flush()
        self.current = None
        left = self.n_collected is None or self.n_tests < self.n_collected  # none after the last: nothing to rerun
        if self.sink.full and left and self.trace and self.session is not None and self.stopped is None:
            self.stopped = "max_output_bytes"  # the tests left run in a fresh sandbox, with a fresh budget
            self.session.shouldstop = "tracegen: the trace output reached its byte budget"

    def pytest_collectreport(self, report):
        if report.failed:
            self.sink.obj(
                type="collect_error", nodeid=report.nodeid, message=_tail(getattr(report, "longreprtext", ""))
            )
            self.sink.flush()

    def pytest_sessionstart(self, session):
        self.session = session

    def pytest_collection_finish(self, session):
        relax_hypothesis(session.items)
        self.n_collected = len(session.items)
        seconds = round(time.monotonic() - self.started, 3)
        self.sink.obj(type="collected", count=len(session.items), seconds=seconds)
        self.sink.flush()

    def pytest_sessionfinish(self, session, exitstatus):
        self.finish(int(exitstatus))

    def finish(self, exitstatus, reason=None):
        if self.ended or os.getpid() != self.main_pid:
            return
        self.ended = True
        if self.tracer.tracing:
            self.tracer.stop()
        self.sink.limit += 4096  # the end object always fits: the cap leaves room for it
        self.sink.obj(
            type="end",
            exitstatus=exitstatus,
            reason=reason,
            stopped=self.stopped,
            tests=self.n_tests,
            events=self.tracer.n_events,
            entries=self.tracer.n_entries,
        )
        self.sink.flush()


def relax_hypothesis(items):
    """When the suite has imported Hypothesis: load a profile derived from its current default without a
    deadline and with the `too_slow` health check suppressed, and give each collected test the same change
    (`@given` fixed its settings at import). A test's deadline is lifted when it is some registered profile's
    (the test inherited it); one the test set itself stays. Whatever goes wrong ends the relaxing there,
    silently."""
    hypothesis = sys.modules.get("hypothesis")
    if hypothesis is None:
        return
    try:
        settings, too_slow = hypothesis.settings, hypothesis.HealthCheck.too_slow
        current = settings.default
        profiles = getattr(settings, "_profiles", None) or {}
        inherited = {profile.deadline for profile in profiles.values()} | {current.deadline}
        untimed = {"deadline": None, "suppress_health_check": _with(current.suppress_health_check, too_slow)}
        settings.register_profile(HYPOTHESIS_PROFILE, parent=current, **untimed)
        settings.load_profile(HYPOTHESIS_PROFILE)
        for item in items:
            test = getattr(item, "obj", None)
            test = getattr(test, "__func__", test)
            own = getattr(test, "_hypothesis_internal_use_settings", None)
            if not isinstance(own, settings):
                continue
            changes = {}
            if own.deadline is not None and own.deadline in inherited:
                changes["deadline"] = None
            if too_slow not in own.suppress_health_check:
                changes["suppress_health_check"] = _with(own.suppress_health_check, too_slow)
            if changes:
                test._hypothesis_internal_use_settings = settings(parent=own, **changes)
    except Exception:
        return


def _with(values, value):
    return list(values) + ([value] if value not in values else [])


def header(sink, budgets, backend=SETTRACE):
    sink.obj(
        type="header",
        tracer_version=tracer_version(backend),
        tracer_backend=backend,
        python="%d.%d.%d" % sys.version_info[:3],
        budgets=dict(DEFAULT_BUDGETS, **(budgets or {})),
        thread=threading.get_ident(),
    )
