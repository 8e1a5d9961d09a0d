"""The failures of a traced test run: everything that went wrong in it (the traces cut from it are kept)."""

from pipeline.engine.failures import Failure
from pipeline.sandbox import SandboxResult
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.requests import last_lines
from pipeline.stages.repos.stream import VIOLATIONS, ParsedStream

HUNG_EXIT = 70  # tracers.guard.audit.HUNG_EXIT: the runner's exit status when a test hung and the run was ended
PYTEST_EXITS = {
    2: ("Interrupted", "the test run was interrupted"),
    3: ("PytestInternalError", "pytest hit an internal error"),
    4: ("PytestUsageError", "pytest could not start (usage error, bad option or conftest)"),
    5: ("NoTests", "pytest collected no tests"),
}


def report_run(stream: ParsedStream, log_tail: str, outcome: SandboxResult, spec: RepoSpec) -> list[Failure]:
    """A failure for everything that went wrong in the traced run (the traces are kept), in this order: what
    the tests did (violations, tests that ended their run, collection errors, failed tests), a malformed
    stream, then how the run ended."""
    log = log_tail[-4000:] or None
    if stream.header is None and outcome.cause is None:
        return [Failure("trace", "TraceFailed", f"the traced test run produced no output ({outcome.describe()})", log)]
    failures = _violations(stream) + _stopped_tests(stream) + _collection_errors(stream) + _failed_tests(stream)
    if stream.error is not None:
        failures.append(
            Failure(
                "parse",
                "BadTraceOutput",
                f"the tracer's output is malformed ({stream.error}); "
                f"traces before that point are kept; the tests may have written to it",
            )
        )
    ending = _ending(stream, log_tail, outcome, spec)
    return failures + ([ending] if ending is not None else [])


def _violations(stream: ParsedStream) -> list[Failure]:
    """One failure per guard violation of a test, then one per run for each kind reported run-wide (PER_RUN),
    naming every test concerned."""
    failures = []
    for violation in stream.violations:
        if violation["kind"] in PER_RUN:
            continue
        test = violation.get("nodeid") or "collection (conftest or module import)"
        text = f"{test}: {VIOLATION_TEXT[violation['kind']]}: {violation.get('detail')}"
        failures.append(Failure("trace", VIOLATIONS[violation["kind"]], text))
    for kind in PER_RUN:
        found = [violation for violation in stream.violations if violation["kind"] == kind]
        tests = list(dict.fromkeys(violation.get("nodeid") or "collection" for violation in found))
        if found:
            failures.append(
                Failure(
                    "trace",
                    VIOLATIONS[kind],
                    f"{VIOLATION_TEXT[kind]} ({found[0].get('detail')}) in {len(tests)} "
                    f"test(s): {', '.join(tests[:10])}{' ...' if len(tests) > 10 else ''}",
                )
            )
    return failures


def _stopped_tests(stream: ParsedStream) -> list[Failure]:
    """The tests that ended their run (a hang, a kill): the rest ran in a fresh sandbox."""
    return [
        Failure(
            "trace",
            stopped["error_type"],
            f"{stopped['nodeid']} {stopped['cause']}; the tests after it ran in a fresh "
            f"sandbox, and traces recorded before are kept",
        )
        for stopped in stream.interrupted
    ]


def _collection_errors(stream: ParsedStream) -> list[Failure]:
    return [
        Failure(
            "trace",
            "CollectionError",
            f"collecting {error.get('nodeid') or 'the tests'} failed: {last_lines(error.get('message') or '', 3)}",
            (error.get("message") or "")[-4000:] or None,
        )
        for error in stream.collect_errors
    ]


def _failed_tests(stream: ParsedStream) -> list[Failure]:
    """One failure naming the tests that failed (traced anyway)."""
    failed = [test.nodeid for test in stream.tests if test.outcome in ("failed", "error")]
    if not failed:
        return []
    return [
        Failure(
            "trace",
            "TestsFailed",
            f"{len(failed)} of {len(stream.tests)} tests failed "
            f"(their calls are traced anyway): {', '.join(failed[:10])}"
            f"{' ...' if len(failed) > 10 else ''}",
        )
    ]


def _ending(stream: ParsedStream, log_tail: str, outcome: SandboxResult, spec: RepoSpec) -> Failure | None:
    """How the run ended, when not as it should: stopped by the sandbox, a hung test, output cut short, pytest
    crashed or exited with an error of its own."""
    log = log_tail[-4000:] or None
    end = stream.end
    if outcome.cause is not None:
        kind = "TraceTimeout" if "wall-clock" in outcome.cause else "TraceKilled"
        hint = (
            f"raise timeout_s={spec.timeout_s:g} in the manifest or deselect slow tests with `test`"
            if kind == "TraceTimeout"
            else "the sandbox stopped it"
        )
        return Failure(
            "trace",
            kind,
            f"the traced test run was stopped: {outcome.cause}{_during(stream)}; "
            f"traces recorded before are kept; {hint}",
            log,
        )
    if outcome.returncode == HUNG_EXIT or (end is not None and end.get("exitstatus") is None):
        why = (end or {}).get("reason") or "a test hung"
        return Failure("trace", "TestHung", f"{why}; the run was ended; traces recorded before are kept", log)
    if end is None and stream.error is None and stream.header is not None:
        return Failure(
            "trace",
            "TraceIncomplete",
            f"the traced test run ended without finishing its output ({outcome.describe()}){_during(stream)}",
            log,
        )
    if end is not None and end.get("reason"):
        return Failure("trace", "PytestCrashed", f"pytest did not run: {end['reason']}", log)
    if end is not None and end.get("exitstatus") in PYTEST_EXITS:
        error_type, text = PYTEST_EXITS[end["exitstatus"]]
        return Failure("trace", error_type, f"{text} (exit status {end['exitstatus']}): {last_lines(log_tail, 3)}", log)
    return None


def _during(stream: ParsedStream) -> str:
    """` while <test> was running` when the run ended inside a test."""
    running = stream.tests[-1].nodeid if stream.tests and stream.tests[-1].outcome is None else None
    return f" while {running} was running" if running else ""


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
