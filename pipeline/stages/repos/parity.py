"""Outcome parity: the tracer must not change what a test does, so each test's traced outcome is compared
with its outcome in an untraced run of the same suite (same sandbox, guards and venv)."""

from pipeline.engine.stats import StageCounters
from pipeline.sources.repos import RepoSpec
from pipeline.stages.repos.stream import ParsedStream

SHOWN = 10


def outcomes(stream: ParsedStream) -> dict[str, str | None]:
    """Each test's outcome in a run (None: the run ended inside the test)."""
    return {test.nodeid: test.outcome for test in stream.tests}


def report_parity(baseline: dict[str, str | None], traced: ParsedStream, spec: RepoSpec, counter: StageCounters, fail):
    """Count the traced tests whose outcome matches the untraced run (`parity` counters: in = compared,
    out = same, dropped: perturbed, unchecked) and write one failure row naming those that differ."""
    compared, differing, unchecked = 0, [], 0
    for test in traced.tests:
        untraced = baseline.get(test.nodeid)
        if untraced is None or test.outcome is None:
            unchecked += 1
            continue
        compared += 1
        if untraced != test.outcome:
            differing.append(f"{test.nodeid} ({untraced} untraced, {test.outcome} traced)")
    counter.n_in, counter.n_out = compared, compared - len(differing)
    if unchecked:
        counter.drop("unchecked", unchecked)
    if differing:
        counter.drop("perturbed", len(differing))
        fail(
            "trace",
            "OutcomePerturbed",
            f"repository {spec.name!r}: {len(differing)} of {compared} tests end otherwise under the tracer than "
            f"without it, so their traces are not the program's own execution (kept, with perturbed=true): "
            f"{', '.join(differing[:SHOWN])}{' ...' if len(differing) > SHOWN else ''}",
        )
    if traced.tests and not baseline:
        fail(
            "trace",
            "ParityUnchecked",
            f"repository {spec.name!r}: the untraced run of the suite recorded no test, so no outcome could be "
            f"compared (perturbed is null)",
        )
