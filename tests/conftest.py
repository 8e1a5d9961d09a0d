"""Shared fixtures: the bundled examples, a local Ray session, sandbox availability."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="session")
def example_records() -> list[dict]:
    """The bundled function corpus, one dict per JSONL line."""
    with open(EXAMPLES / "functions.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="session")
def ray_local():
    """One embedded local Ray for the whole session (starting Ray costs seconds)."""
    from pipeline.orchestrate import start_ray
    import ray

    start_ray(None, 2)
    yield ray
    ray.shutdown()
