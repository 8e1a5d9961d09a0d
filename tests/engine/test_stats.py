"""What a stage yields: rows per table and its counters; stages compose with `+`, units merge their counters."""

from pipeline.engine.stats import StageCounters, StageOutput, merge_counters


def counters(stage: str, n_in: int, n_out: int, **dropped: int) -> StageCounters:
    counter = StageCounters(stage)
    counter.n_in, counter.n_out = n_in, n_out
    for reason, n in dropped.items():
        counter.drop(reason, n)
    return counter


def test_stages_compose_rows_in_order_and_keep_each_stages_counters():
    traced = StageOutput(
        {"traces": [{"id": 1}, {"id": 2}], "failures": [{"id": "a"}]}, {"trace": counters("trace", 3, 2)}
    )
    sampled = StageOutput(
        {"trajectories": [{"id": 9}], "failures": [{"id": "b"}]}, {"sample": counters("sample", 2, 1)}
    )
    both = traced + sampled
    assert both.tables == {
        "traces": [{"id": 1}, {"id": 2}],
        "failures": [{"id": "a"}, {"id": "b"}],
        "trajectories": [{"id": 9}],
    }
    assert list(both.counters) == ["trace", "sample"]
    assert traced.rows("failures") == [{"id": "a"}]  # the operands are left as they were
    assert both.rows("go_runs") == []


def test_counters_as_records_hold_them_and_merged_across_units():
    one = StageOutput({}, {"trace": counters("trace", 3, 2, SyntaxError=1)}).counters_dict()
    two = StageOutput({}, {"trace": counters("trace", 1, 0, SyntaxError=1, Timeout=1)}).counters_dict()
    assert one == {"trace": {"in": 3, "out": 2, "dropped": {"SyntaxError": 1}, "seconds": 0.0, "events": 0}}
    assert merge_counters([one, two]) == {
        "trace": {"in": 4, "out": 2, "dropped": {"SyntaxError": 2, "Timeout": 1}, "seconds": 0.0, "events": 0}
    }
