"""The failures collector: one row per failure, in the order recorded, its message starting with the input's
label, and the input counted as dropped for its reason where the stage's counters are given."""

from pipeline.engine.failures import Failure, Failures, Input
from pipeline.engine.stats import StageCounters
from schemas import schema_of


def test_each_failure_is_a_row_of_its_input_in_the_order_recorded():
    failures = Failures("u7")
    record = Input("f1", "examples/functions.jsonl:3", "record 'f1'")
    repo = Input(None, "repos.toml:[[repo]] #2", "repository 'lib'")
    failures.add(record, Failure("parse", "BadTraceOutput", "the tracer's output is malformed"))
    failures.extend(repo, [Failure("install", "InstallFailed", "pip failed", "tail"), Failure("trace", "NoTests", "x")])
    assert failures.rows == [
        {
            "unit_id": "u7",
            "source_id": "f1",
            "stage": "parse",
            "error_type": "BadTraceOutput",
            "message": "record 'f1': the tracer's output is malformed",
            "stderr_tail": None,
            "input_ref": "examples/functions.jsonl:3",
        },
        {
            "unit_id": "u7",
            "source_id": None,
            "stage": "install",
            "error_type": "InstallFailed",
            "message": "repository 'lib': pip failed",
            "stderr_tail": "tail",
            "input_ref": "repos.toml:[[repo]] #2",
        },
        {
            "unit_id": "u7",
            "source_id": None,
            "stage": "trace",
            "error_type": "NoTests",
            "message": "repository 'lib': x",
            "stderr_tail": None,
            "input_ref": "repos.toml:[[repo]] #2",
        },
    ]
    assert [list(row) for row in failures.rows] == [schema_of("failures").names] * 3


def test_a_failure_is_counted_as_a_drop_of_its_reason_only_where_counters_are_given():
    counters = StageCounters("trace")
    failures = Failures("u")
    record = Input("f1", "x:1", "record 'f1'")
    failures.add(record, Failure("setup", "SyntaxError", "m"), counters)
    failures.add(record, Failure("setup", "SyntaxError", "m"), counters)
    failures.add(record, Failure("trace", "OutcomePerturbed", "m"))
    assert dict(counters.dropped) == {"SyntaxError": 2}
    assert len(failures.rows) == 3
