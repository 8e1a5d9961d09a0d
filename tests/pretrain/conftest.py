"""Fixtures of the pretraining tests: a tiny real dataset (two bundled-style functions traced by the real job,
one trajectory per trace and direction) packed by the real packing job, and a model trained to memorise it."""

import json

import pytest
from built_once import built_once

from pipeline.engine.job import run_job
from pipeline.kinds.functions import FunctionsConfig, FunctionsKind
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.stages.pack.packing import PackSettings
from pipeline.stages.trajectories import SamplingSettings

RECORDS = [
    {"id": "add_then_double", "code": "def f(x):\n    y = x + 3\n    return y * 2\n", "input": "4"},
    {"id": "count_down", "code": "def f(n):\n    while n > 0:\n        n -= 2\n    return n\n", "input": "5"},
]
SEQ_LEN = 256


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory, ray_local) -> str:
    def build(root):
        (root / "functions.jsonl").write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
        config = FunctionsConfig(sandbox="process", sampling=SamplingSettings(per_trace=1))
        run_job(FunctionsKind(), str(root / "functions.jsonl"), config, str(root / "out"))

    return str(built_once(tmp_path_factory, "pretrain-data", build) / "out")


@pytest.fixture(scope="session")
def tiny_packed(tiny_dataset, tmp_path_factory) -> str:
    """The tiny dataset in bytes: a BPE trained on a few functions packs them into fewer samples than a batch."""

    def build(root):
        config = PackConfig(packing=PackSettings(seq_len=SEQ_LEN), tokenizer="bytes")
        run_job(PackKind(), tiny_dataset, config, str(root / "packed"))

    return str(built_once(tmp_path_factory, "pretrain-packed", build) / "packed")


@pytest.fixture(scope="session")
def tiny_go_dataset(tmp_path_factory, ray_local) -> str:
    """One bundled Go program whose scheduler choices vary, run 6 times under bubblewrap."""
    import shutil

    from go_helpers import EXAMPLES

    from pipeline.kinds.go import GoConfig, GoKind
    from pipeline.stages.go.runs import GoSettings

    def build(root):
        shutil.copytree(EXAMPLES / "pingpong_unbuffered", root / "programs" / "pingpong_unbuffered")
        run_job(GoKind(), str(root / "programs"), GoConfig(go=GoSettings(runs=6)), str(root / "out"))

    return str(built_once(tmp_path_factory, "pretrain-go", build) / "out")
