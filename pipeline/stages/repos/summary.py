"""The `repo_runs` row of one repository (schemas/repo_runs.py): how it installed, what its suite yielded."""

from collections import Counter

from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.install import InstallHow
from pipeline.stages.repos.stream import ParsedStream

TOP_FAILURES = 5


def repo_run_row(
    spec: RepoSpec,
    unit_id: str,
    commit: str | None,
    how: InstallHow | None,
    traced: ParsedStream | None,
    baseline: dict[str, str | None] | None,
    traced_tests: set[str] | None,
    n_traces: int,
    failures: list[dict],
) -> dict:
    """`how`: how the install went (None: no install worked); `traced`: the traced run's stream (None: the
    suite never ran); `baseline`: each test's untraced outcome (None: no parity run); `traced_tests`: the tests
    with an entry cut. A test counts as traced when it also passed untraced (traced, without a parity run or
    when the untraced run has no test of its id: a suite whose parameter ids vary between processes), so
    `tests_traced` ÷ `tests_passed_untraced` is the share of the passing suite that became data."""
    passed = None
    if traced is not None:
        outcomes = {t.nodeid: t.outcome for t in traced.tests} | (baseline or {})
        passed = {nodeid for nodeid, outcome in outcomes.items() if outcome == "passed"}
    repaired = [
        module
        for repair in (how.repairs if how else ())
        if repair.ok
        for module in repair.modules
        if module not in repair.unresolved
    ]
    by_type = Counter(row["error_type"] for row in failures)
    return {
        "unit_id": unit_id,
        "name": spec.name,
        "piece": spec.piece or None,
        "source": f"sdist:{spec.sdist}" if spec.sdist else spec.url,
        "commit": commit,
        "install_step": how.step if how else None,
        "install_sources": list(how.sources if how else ()),
        "editable": how.editable if how else None,
        "install_commands": [f"{c.command}: {'ok' if c.ok else 'failed'}" for c in (how.prepared if how else ())],
        "repaired_modules": repaired,
        "tests_collected": (traced.collected or {}).get("count") if traced is not None else None,
        "tests_passed_untraced": None if baseline is None else sum(o == "passed" for o in baseline.values()),
        "tests_passed_traced": None if traced is None else sum(t.outcome == "passed" for t in traced.tests),
        "tests_traced": None if passed is None else len(passed & (traced_tests or set())),
        "traces": n_traces,
        "restarts": 0 if traced is None else traced.restarts,
        "top_failures": [
            {"error_type": error_type, "n": n}
            for error_type, n in sorted(by_type.items(), key=lambda item: (-item[1], item[0]))[:TOP_FAILURES]
        ],
    }
