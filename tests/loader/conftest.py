"""Fixtures of the loader tests: real datasets made by real jobs — a function-tracing dataset, a Go dataset
of two bundled programs, a repository dataset of one fixture package — and packed datasets made from them by
the packing job (session-scoped)."""

import json
import os
import shutil
import tempfile

import pytest
import repo_fixtures
from decontam_fixtures import ITEMS, PLANTED, write_jsonl
from go_helpers import EXAMPLES as GO_EXAMPLES
from loader_helpers import pack

from pipeline.engine.job import run_job
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.kinds.repos import ReposConfig, ReposKind
from pipeline.stages.decontaminate import Decontaminator
from pipeline.stages.go.runs import GoSettings
from pipeline.stages.trace_functions import TraceSettings
from pipeline.stages.trajectories import SamplingSettings

GO_PROGRAMS = ("pingpong_unbuffered", "select_schedule_dependent")


@pytest.fixture(scope="session")
def python_dataset(tmp_path_factory, example_records, ray_local) -> str:
    """A function-tracing dataset of 24 bundled records, one of them twice under another id (a `duplicates`
    row), two that fail (`failures` rows) and a near-copy of a benchmark item (a `contaminated` row), traced
    with the process sandbox."""
    chosen = [record for record in example_records if not record["id"].startswith("bad_")][:24]
    chosen += [{**chosen[0], "id": "copy_of_first"}]
    chosen += [record for record in example_records if record["id"] in ("bad_syntax", "bad_raises")]
    chosen += PLANTED[:1]
    corpus = tmp_path_factory.mktemp("loader-corpus") / "functions.jsonl"
    corpus.write_text("".join(json.dumps(record) + "\n" for record in chosen))
    benchmark = write_jsonl(corpus.with_name("benchmark.jsonl"), ITEMS)
    out = str(tmp_path_factory.mktemp("loader-python") / "out")
    config = FunctionsConfig(
        sandbox="process",
        chunk_size=8,
        trace=TraceSettings(max_seconds=1.0),
        decontaminate=Decontaminator.from_files([benchmark]),
    )
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
def repos_dataset(tmp_path_factory, ray_local) -> str:
    """A repository-tracing dataset of one fixture package (`calc`), under bubblewrap."""
    root = tmp_path_factory.mktemp("loader-repos")
    repo_fixtures.make_repo(root / "calc", repo_fixtures.CALC)
    manifest = root / "repos.toml"
    manifest.write_text(f'[[repo]]\nname = "calc"\nurl = "{root / "calc"}"\nref = "main"\n')
    pip_cache = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")
    config = ReposConfig(sampling=SamplingSettings(per_trace=1), cache_dir=str(root / "cache"), pip_cache_dir=pip_cache)
    out = str(root / "out")
    run_job(ReposKind(), str(manifest), config, out)
    return out


@pytest.fixture(scope="session")
def packed(python_dataset, tmp_path_factory) -> str:
    """The Python dataset packed in 512-token samples, bytes tokenizer, loss on the predicted states."""
    return pack(python_dataset, str(tmp_path_factory.mktemp("packed") / "bytes"), 512)


@pytest.fixture(scope="session")
def packed_go(go_dataset, tmp_path_factory) -> str:
    return pack(go_dataset, str(tmp_path_factory.mktemp("packed") / "go"), 4096)
