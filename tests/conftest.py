"""Shared fixtures: the bundled examples, a local Ray session.

The tests mirror the package (tests/engine, tests/kinds, tests/sources, tests/stages, ...). Helper modules
that tests in several directories import (`debugger_programs`, `debugger_helpers`, `repo_fixtures`,
`go_helpers`, `import_graph`) live here, next to this file: pytest puts this directory on `sys.path` when it loads this
conftest, so they import by their plain name from any test, whichever subset runs. Helpers used by one
directory only live in it. Test module names are unique across the tree (no `__init__.py`: modules are
imported by their base name).
"""

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
# Ray workers and the tests' subprocesses import this checkout, whichever one the venv's editable install names (a
# second worktree tested with one venv); sandboxes clear their environment, so sandboxed code never sees it.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One OpenMP thread per pytest-xdist worker (set before torch is imported; inherited by Ray's and the tests'
    # subprocesses): the workers already keep every core busy, and OpenMP threads that spin-wait for a core another
    # worker holds made a torch test many times slower than it is alone.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def example_records() -> list[dict]:
    """The bundled function corpus, one dict per JSONL line."""
    with open(EXAMPLES / "functions.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="session")
def ray_local():
    """One embedded local Ray for the whole session (starting Ray costs seconds)."""
    import ray

    from pipeline.engine.orchestrate import start_ray

    start_ray(None, 2)
    yield ray
    ray.shutdown()


# Modules whose tests start what the fixtures below do not show: a job's own Ray (commands run in process or as
# subprocesses), repositories installed by pip in the sandbox, or long sandboxed runs. `make test-quick` leaves
# them out with the `ray`, `docker` and `cluster` tests (seconds each, measured under `make test`).
SLOW_MODULES = {
    "cli/test_cli.py",
    "engine/test_compaction.py",
    "engine/test_local_ray.py",
    "engine/test_memory_bound.py",
    "loader/test_pack_streaming.py",
    "refresh/test_dataset_report.py",
    "refresh/test_refresh.py",
    "refresh/test_refresh_delta.py",
    "sources/test_sdist_source.py",
    "stages/go/test_validity.py",
    "stages/test_bounded_disk_and_time.py",
    "stages/test_dedup_distributed.py",
    "stages/test_monitoring_in_the_sandbox.py",
    "stages/test_repo_install_rules.py",
    "stages/test_repo_output_budget.py",
    "stages/test_repo_parity.py",
    "stages/test_suites_run_as_their_ci_runs_them.py",
    "stages/test_suites_that_fight_the_tracer.py",
    "test_layout.py",
    "tracers/install/test_install_steps.py",
    "tracers/trace/test_monitoring_backend.py",
}


def pytest_collection_modifyitems(config, items):
    """Mark what each test needs, so the quick lane (`make test-quick`) can leave out the slow machinery: `ray`
    (an embedded Ray, through the `ray_local` fixture), `docker` (a Docker engine), `cluster` (a Ray cluster
    started by the test), `slow` (a module of SLOW_MODULES)."""
    for item in items:
        if item.path.relative_to(ROOT / "tests").as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        needs = set(item.fixturenames)
        if "ray_local" in needs:
            item.add_marker(pytest.mark.ray)
        if needs & {"docker_client", "docker_sandbox"} or "docker" in item.nodeid:
            item.add_marker(pytest.mark.docker)
        if "cluster" in item.path.relative_to(ROOT / "tests").parts[:1]:
            item.add_marker(pytest.mark.cluster)
