"""Fixtures of the loader tests: real datasets made by real jobs — a function-tracing dataset, a Go dataset
of two bundled programs, a repository dataset of one fixture package — and packed datasets made from them by
the packing job (session-scoped)."""

import json
import os
import shutil
import tempfile

import pytest
import repo_fixtures
from built_once import built_once
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

    def build(root):
        chosen = [record for record in example_records if not record["id"].startswith("bad_")][:24]
        chosen += [{**chosen[0], "id": "copy_of_first"}]
        chosen += [record for record in example_records if record["id"] in ("bad_syntax", "bad_raises")]
        chosen += PLANTED[:1]
        corpus = root / "functions.jsonl"
        corpus.write_text("".join(json.dumps(record) + "\n" for record in chosen))
        benchmark = write_jsonl(root / "benchmark.jsonl", ITEMS)
        config = FunctionsConfig(
            sandbox="process",
            chunk_size=8,
            trace=TraceSettings(max_seconds=1.0),
            decontaminate=Decontaminator.from_files([benchmark]),
        )
        run_job(FunctionsKind(), str(corpus), config, str(root / "out"))

    return str(built_once(tmp_path_factory, "loader-python", build) / "out")


@pytest.fixture(scope="session")
def go_dataset(tmp_path_factory, ray_local) -> str:
    """A Go dataset of two bundled programs, 4 runs each, under bubblewrap."""

    def build(root):
        for name in GO_PROGRAMS:
            shutil.copytree(GO_EXAMPLES / name, root / "programs" / name)
        run_job(GoKind(), str(root / "programs"), GoConfig(go=GoSettings(runs=4)), str(root / "out"))

    return str(built_once(tmp_path_factory, "loader-go", build) / "out")


@pytest.fixture(scope="session")
def repos_dataset(tmp_path_factory, ray_local) -> str:
    """A repository-tracing dataset of one fixture package (`calc`), under bubblewrap."""

    def build(root):
        repo_fixtures.make_repo(root / "calc", repo_fixtures.CALC)
        manifest = root / "repos.toml"
        manifest.write_text(f'[[repo]]\nname = "calc"\nurl = "{root / "calc"}"\nref = "main"\n')
        pip_cache = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")
        config = ReposConfig(
            sampling=SamplingSettings(per_trace=1), cache_dir=str(root / "cache"), pip_cache_dir=pip_cache
        )
        run_job(ReposKind(), str(manifest), config, str(root / "out"))

    return str(built_once(tmp_path_factory, "loader-repos", build) / "out")


@pytest.fixture(scope="session")
def packed(python_dataset, tmp_path_factory) -> str:
    """The Python dataset packed in 512-token samples, bytes tokenizer, loss on the predicted states."""
    return str(
        built_once(tmp_path_factory, "loader-packed-bytes", lambda root: pack(python_dataset, str(root / "out"), 512))
        / "out"
    )


@pytest.fixture(scope="session")
def packed_go(go_dataset, tmp_path_factory) -> str:
    return str(
        built_once(tmp_path_factory, "loader-packed-go", lambda root: pack(go_dataset, str(root / "out"), 4096)) / "out"
    )
