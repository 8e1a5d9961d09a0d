"""Fixtures of the loader tests: real datasets made by real jobs — a function-tracing dataset, a Go dataset
of two bundled programs — and packed datasets made from them by the packing job (session-scoped)."""

import json
import shutil

import pytest
from go_helpers import EXAMPLES as GO_EXAMPLES
from loader_helpers import pack

from pipeline.engine.job import run_job
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.stages.go.runs import GoSettings
from pipeline.stages.trace_functions import TraceSettings

GO_PROGRAMS = ("pingpong_unbuffered", "select_schedule_dependent")


@pytest.fixture(scope="session")
def python_dataset(tmp_path_factory, example_records, ray_local) -> str:
    """A function-tracing dataset of 24 bundled records, one of them twice under another id (a `duplicates`
    row) and two that fail (`failures` rows), traced with the process sandbox."""
    chosen = [record for record in example_records if not record["id"].startswith("bad_")][:24]
    chosen += [{**chosen[0], "id": "copy_of_first"}]
    chosen += [record for record in example_records if record["id"] in ("bad_syntax", "bad_raises")]
    corpus = tmp_path_factory.mktemp("loader-corpus") / "functions.jsonl"
    corpus.write_text("".join(json.dumps(record) + "\n" for record in chosen))
    out = str(tmp_path_factory.mktemp("loader-python") / "out")
    config = FunctionsConfig(sandbox="process", chunk_size=8, trace=TraceSettings(max_seconds=1.0))
    run_job(FunctionsKind(), str(corpus), config, out)
    return out


@pytest.fixture(scope="session")
def go_dataset(tmp_path_factory, ray_local) -> str:
    """A Go dataset of two bundled programs, 4 runs each, under bubblewrap."""
    programs = tmp_path_factory.mktemp("loader-go-programs")
    for name in GO_PROGRAMS:
        shutil.copytree(GO_EXAMPLES / name, programs / name)
    out = str(tmp_path_factory.mktemp("loader-go") / "out")
    run_job(GoKind(), str(programs), GoConfig(go=GoSettings(runs=4)), out)
    return out


@pytest.fixture(scope="session")
def packed(python_dataset, tmp_path_factory) -> str:
    """The Python dataset packed in 512-token samples, bytes tokenizer, loss on the predicted states."""
    return pack(python_dataset, str(tmp_path_factory.mktemp("packed") / "bytes"), 512)


@pytest.fixture(scope="session")
def packed_go(go_dataset, tmp_path_factory) -> str:
    return pack(go_dataset, str(tmp_path_factory.mktemp("packed") / "go"), 4096)
