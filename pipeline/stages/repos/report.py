"""Failure rows for everything that went wrong in a traced test run (the traces cut from it are kept)."""

from pipeline.sources.repos import RepoSpec
from pipeline.stages.repos.requests import last_lines
from pipeline.stages.repos.stream import VIOLATIONS, ParsedStream

HUNG_EXIT = 70  # tracers.guard.audit.HUNG_EXIT: the runner's exit status when a test hung and the run was ended
PYTEST_EXITS = {
    2: ("Interrupted", "the test run was interrupted"),
    3: ("PytestInternalError", "pytest hit an internal error"),
    4: ("PytestUsageError", "pytest could not start (usage error, bad option or conftest)"),
    5: ("NoTests", "pytest collected no tests"),
}


def report_run(stream: ParsedStream, log_tail: str, outcome, spec: RepoSpec, counter, fail) -> None:
    """Failure rows for everything that went wrong in the traced run (the traces are kept)."""
    name = repr(spec.name)
    running = stream.tests[-1].nodeid if stream.tests and stream.tests[-1].outcome is None else None
    during = f" while {running} was running" if running else ""
    if stream.header is None and outcome.cause is None:
        fail(
            "trace",
            "TraceFailed",
            f"repository {name}: the traced test run produced no output ({outcome.describe()})",
            log_tail[-4000:] or None,
        )
        return
    for violation in stream.violations:
        if violation["kind"] in PER_RUN:
            continue
        kind = VIOLATIONS[violation["kind"]]
        test = violation.get("nodeid") or "collection (conftest or module import)"
        fail(
            "trace", kind, f"repository {name}: {test}: {VIOLATION_TEXT[violation['kind']]}: {violation.get('detail')}"
        )
    for kind in PER_RUN:  # one row per run, naming every test concerned
        found = [violation for violation in stream.violations if violation["kind"] == kind]
        tests = list(dict.fromkeys(violation.get("nodeid") or "collection" for violation in found))
        if found:
            fail(
                "trace",
                VIOLATIONS[kind],
                f"repository {name}: {VIOLATION_TEXT[kind]} ({found[0].get('detail')}) in {len(tests)} "
                f"test(s): {', '.join(tests[:10])}{' ...' if len(tests) > 10 else ''}",
            )
    for stopped in stream.interrupted:
        fail(
            "trace",
            stopped["error_type"],
            f"repository {name}: {stopped['nodeid']} {stopped['cause']}; the tests after it ran in a fresh "
            f"sandbox, and traces recorded before are kept",
        )
    for error in stream.collect_errors:
        fail(
            "trace",
            "CollectionError",
            f"repository {name}: collecting {error.get('nodeid') or 'the tests'} "
            f"failed: {last_lines(error.get('message') or '', 3)}",
            (error.get("message") or "")[-4000:] or None,
        )
    failed = [test.nodeid for test in stream.tests if test.outcome in ("failed", "error")]
    if failed:
        fail(
            "trace",
            "TestsFailed",
            f"repository {name}: {len(failed)} of {len(stream.tests)} tests failed "
            f"(their calls are traced anyway): {', '.join(failed[:10])}"
            f"{' ...' if len(failed) > 10 else ''}",
        )
    if stream.error is not None:
        fail(
            "parse",
            "BadTraceOutput",
            f"repository {name}: the tracer's output is malformed ({stream.error}); "
            f"traces before that point are kept; the tests may have written to it",
        )
    end = stream.end
    if outcome.cause is not None:
        kind = "TraceTimeout" if "wall-clock" in outcome.cause else "TraceKilled"
        hint = (
            f"raise timeout_s={spec.timeout_s:g} in the manifest or deselect slow tests with `test`"
            if kind == "TraceTimeout"
            else "the sandbox stopped it"
        )
        fail(
            "trace",
            kind,
            f"repository {name}: the traced test run was stopped: {outcome.cause}{during}; "
            f"traces recorded before are kept; {hint}",
            log_tail[-4000:] or None,
        )
    elif outcome.returncode == HUNG_EXIT or (end is not None and end.get("exitstatus") is None):
        fail(
            "trace",
            "TestHung",
            f"repository {name}: {(end or {}).get('reason') or 'a test hung'}; the run "
            f"was ended; traces recorded before are kept",
            log_tail[-4000:] or None,
        )
    elif end is None and stream.error is None and stream.header is not None:
        fail(
            "trace",
            "TraceIncomplete",
            f"repository {name}: the traced test run ended without finishing its output ({outcome.describe()}){during}",
            log_tail[-4000:] or None,
        )
    elif end is not None and end.get("reason"):
        fail(
            "trace",
            "PytestCrashed",
            f"repository {name}: pytest did not run: {end['reason']}",
            log_tail[-4000:] or None,
        )
    elif end is not None and end.get("exitstatus") in PYTEST_EXITS:
        error_type, text = PYTEST_EXITS[end["exitstatus"]]
        fail(
            "trace",
            error_type,
            f"repository {name}: {text} (exit status {end['exitstatus']}): {last_lines(log_tail, 3)}",
            log_tail[-4000:] or None,
        )


VIOLATION_TEXT = {
    "write": "tried to write outside its scratch directory (refused)",
    "network": "tried to open a network connection, which is off while tests are traced (refused)",
    "fork_bomb": "forked too many processes (a fork bomb); further forks were refused and its processes killed",
    "timeout": "ran past test_timeout_s and was aborted; its open calls are kept as cut traces",
    "output_flood": "flooded its output and was aborted",
    "tracer_disabled": "the suite turned the tracer off (sys.settrace); calls after that are not traced",
    "tracer_patched": "the suite replaced the tracer's entry points; the tracer kept its own and traced anyway",
}
PER_RUN = ("tracer_disabled", "tracer_patched")
