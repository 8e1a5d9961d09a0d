"""A repository's `traces` rows leave the cutter in bounded batches as its tests are parsed (the unit never holds
them all), and the batches are exactly the rows the unbatched cut gives, in order."""

from types import SimpleNamespace

from pipeline.engine.stats import StageCounters
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos import cut
from pipeline.stages.repos.cut import EntryCutter
from pipeline.stages.repos.stream import parse_repo_stream
from pipeline.stages.repos.suite_run import RepoTraceSettings
from tests.stages.test_repo_sources_are_bounded import entries_stream


def cut_rows(tmp_path, emit=None):
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / "long.py").write_text("def long(x):\n    return x\n")
    spec = RepoSpec(name="many", url="file:///many", ref="main")
    checkout = SimpleNamespace(path=str(tmp_path), commit="0" * 40, url="")
    counter = StageCounters("cut")
    cutter = EntryCutter(spec, checkout, RepoTraceSettings(), counter, emit=emit)
    stream = parse_repo_stream(entries_stream(3 * cut.BATCH_ROWS + 7), 10_000, on_test=cutter)
    assert stream.error is None
    assert all(not test.events and not test.entries for test in stream.tests)  # released once cut
    left, _ = cutter.finish()
    return left, counter


def test_rows_leave_in_bounded_batches_equal_to_the_whole_cut(tmp_path):
    whole, counter = cut_rows(tmp_path)
    emitted: list[list[dict]] = []
    left, streamed_counter = cut_rows(tmp_path, emit=emitted.append)
    assert left == []
    assert len(emitted) == 4 and all(len(batch) <= cut.BATCH_ROWS for batch in emitted)
    assert [row for batch in emitted for row in batch] == whole
    assert streamed_counter.as_dict() | {"seconds": 0} == counter.as_dict() | {"seconds": 0}
    assert counter.n_out == len(whole) == 3 * cut.BATCH_ROWS + 7
