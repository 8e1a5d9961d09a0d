"""trace-repos --decontaminate end to end: a fixture repository whose module holds near-copies of benchmark items
(renamed, reformatted, a constant changed) among unrelated functions; the copies' traces and trajectories are
dropped, each trace a `contaminated` row naming the item; the unrelated functions' traces are kept."""

import os
import shutil
import tempfile

import pytest
import repo_fixtures as fixtures
from decontam_fixtures import ITEMS, write_jsonl

from pipeline.engine.job import run_job
from pipeline.engine.reader import table_rows
from pipeline.kinds.repos import ReposConfig, ReposKind
from pipeline.stages.decontaminate import Decontaminator
from pipeline.stages.trajectories import SamplingSettings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")  # shared with test_repos.py

COPIES = {
    "pyproject.toml": fixtures.CALC["pyproject.toml"].replace('name = "calc"', 'name = "copies"'),
    "src/copies/__init__.py": "",
    "src/copies/ops.py": """
        def rank_counts(tokens):
            counts = {}
            for tok in tokens:
                width = len(tok)
                counts[width] = counts.get(width, 0) + 1
            order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            return order


        def fold(w):
            out = ''
            half = len(w) // 3
            for i in range(half):
                out += w[i].upper()
            for i in range(half, len(w)):
                out += w[len(w) - 1 - i + half]
            return out.center(len(w) + 2, '*')


        def running_max(xs):
            best, seen = None, []
            for x in xs:
                best = x if best is None or x > best else best
                seen.append(best)
            return seen
        """,
    "tests/test_ops.py": """
        from copies.ops import fold, rank_counts, running_max


        def test_rank_counts():
            assert rank_counts(['a', 'bb', 'cc']) == [(2, 2), (1, 1)]


        def test_fold():
            assert fold('planet') == '*PLtena*'


        def test_running_max():
            assert running_max([1, 3, 2]) == [1, 3, 3]
        """,
}


def test_copies_in_a_repository_are_dropped_and_recorded(tmp_path, ray_local):
    commit = fixtures.make_repo(tmp_path / "copies", COPIES)
    manifest = tmp_path / "repos.toml"
    manifest.write_text(f'[[repo]]\nname = "copies"\nurl = "{tmp_path / "copies"}"\nref = "main"\ntimeout_s = 60\n')
    decontaminator = Decontaminator.from_files([write_jsonl(tmp_path / "bench.jsonl", ITEMS)])
    config = ReposConfig(
        sampling=SamplingSettings(per_trace=1),
        cache_dir=str(tmp_path / "cache"),
        pip_cache_dir=PIP_CACHE,
        decontaminate=decontaminator,
    )
    out = str(tmp_path / "out")
    run_job(ReposKind(), str(manifest), config, out)

    traced = {row["qualname"] for row in table_rows(out, "traces")}
    assert "running_max" in traced and not traced & {"rank_counts", "fold"}
    sampled = {row["source_id"].rsplit(":", 1)[-1] for row in table_rows(out, "trajectories")}
    assert "running_max" in sampled and not sampled & {"rank_counts", "fold"}
    rows = list(table_rows(out, "contaminated"))
    assert {(row["source_id"], row["item_id"], row["rule"]) for row in rows} == {
        (f"copies@{commit}:src/copies/ops.py:rank_counts", "bench_0", "minhash"),
        (f"copies@{commit}:src/copies/ops.py:fold", "bench_2", "minhash"),
    }
    assert all(row["table"] == "traces" and row["benchmark"] == decontaminator.benchmarks[0].path for row in rows)
