"""Fixtures of the kind tests: one function-tracing dataset for the session, which the functions and the
re-sampling tests read (and copy before they change anything)."""

import json

import pytest
from built_once import built_once

from pipeline.engine.job import run_job
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.stages.trace_functions import TraceSettings

FUNCTIONS_CONFIG = FunctionsConfig(chunk_size=6, trace=TraceSettings(max_seconds=1.0, record_timeout_s=3.0))


@pytest.fixture(scope="session")
def functions_config() -> FunctionsConfig:
    """The config of the `dataset` fixture: 6 records a unit, short tracer budgets."""
    return FUNCTIONS_CONFIG


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, example_records) -> str:
    """A small corpus: good records, a few hostile ones and one unreadable line."""

    def build(root):
        chosen = [r for r in example_records if not r["id"].startswith("bad_")][:12]
        chosen += [r for r in example_records if r["id"] in ("bad_syntax", "bad_infinite_loop", "bad_raises")]
        (root / "functions.jsonl").write_text("\n".join(json.dumps(r) for r in chosen) + "\n{not json\n")

    return str(built_once(tmp_path_factory, "kinds-corpus", build) / "functions.jsonl")


@pytest.fixture(scope="session")
def dataset(corpus, functions_config, tmp_path_factory, ray_local) -> tuple[str, dict]:
    """(out, manifest) of the function job over `corpus`."""

    def build(root):
        run_job(FunctionsKind(), corpus, functions_config, str(root / "out"))

    out = built_once(tmp_path_factory, "kinds-dataset", build) / "out"
    return str(out), json.loads((out / "manifest.json").read_text())
