"""Outcome parity: the tracer must not change what a test does, so each test's traced outcome is compared
with its outcome in an untraced run of the same suite (same sandbox, guards and venv).

A test that ends otherwise traced is `OutcomePerturbed`, or `OutcomePerturbedTiming` when its traced failure
shows a timing failure by one of the named patterns of TIMING (tracing makes a suite slower, and a test that
times itself can fail for that alone): Hypothesis's `DeadlineExceeded`, its `Flaky` "exceeded the deadline"
and its `HealthCheck.too_slow`; `TimeoutError` (asyncio's, socket's and concurrent.futures' are the same);
subprocess's `TimeoutExpired`; pytest-timeout's `Failed: Timeout >Ns`. A test's own duration assertion is
not recognisable in general and stays `OutcomePerturbed`. The plugin already lifts Hypothesis's deadline and
`too_slow` in both runs (tracers/suite/pytest_plugin.py), so what is left here is a test's own time limit.
"""

import re

from pipeline.engine.failures import Failure
from pipeline.engine.stats import StageCounters
from pipeline.stages.repos.stream import ParsedStream

SHOWN = 10
TIMING = re.compile(
    r"\bDeadlineExceeded\b|exceed(?:s|ed) the deadline of|HealthCheck\.too_slow|\bTimeoutError\b"
    r"|\bTimeoutExpired\b|Failed: Timeout >"
)


def outcomes(stream: ParsedStream) -> dict[str, str | None]:
    """Each test's outcome in a run (None: the run ended inside the test)."""
    return {test.nodeid: test.outcome for test in stream.tests}


def report_parity(baseline: dict[str, str | None], traced: ParsedStream, counter: StageCounters) -> list[Failure]:
    """Count the traced tests whose outcome matches the untraced run (`parity` counters: in = compared,
    out = same, dropped: perturbed, perturbed_timing, unchecked); a failure naming those that differ, one for
    timing failures and one for the rest."""
    compared, differing, timing, unchecked = 0, [], [], 0
    for test in traced.tests:
        untraced = baseline.get(test.nodeid)
        if untraced is None or test.outcome is None:
            unchecked += 1
            continue
        compared += 1
        if untraced != test.outcome:
            shown = f"{test.nodeid} ({untraced} untraced, {test.outcome} traced)"
            timed = test.outcome in ("failed", "error") and TIMING.search(test.message or "")
            (timing if timed else differing).append(shown)
    counter.n_in, counter.n_out = compared, compared - len(differing) - len(timing)
    if unchecked:
        counter.drop("unchecked", unchecked)
    failures = []
    if differing:
        counter.drop("perturbed", len(differing))
        failures.append(
            Failure(
                "trace",
                "OutcomePerturbed",
                f"{len(differing)} of {compared} tests end otherwise under the tracer than without it, so their "
                f"traces are not the program's own execution (kept, with perturbed=true): {shown_list(differing)}",
            )
        )
    if timing:
        counter.drop("perturbed_timing", len(timing))
        failures.append(
            Failure(
                "trace",
                "OutcomePerturbedTiming",
                f"{len(timing)} of {compared} tests fail a time limit under the tracer and not without it "
                f"(tracing is slower; their traces are kept, with perturbed=true): {shown_list(timing)}",
            )
        )
    if traced.tests and not baseline:
        failures.append(
            Failure(
                "trace",
                "ParityUnchecked",
                "the untraced run of the suite recorded no test, so no outcome could be compared (perturbed is null)",
            )
        )
    return failures


def shown_list(tests: list[str]) -> str:
    return f"{', '.join(tests[:SHOWN])}{' ...' if len(tests) > SHOWN else ''}"
