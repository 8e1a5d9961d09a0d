"""Race mode labels hangs by what they are: the injected watchdog no longer races with the harness's
init, so a deadlock under --race is `deadlock`, a spin `timeout`, and only a real race is `race`."""

import pytest
from go_helpers import requires_bwrap, requires_go, trace

pytestmark = [requires_go, requires_bwrap]


@pytest.mark.parametrize(
    ("name", "status"),
    [("abba_deadlock", "deadlock"), ("stuck_test", "deadlock"), ("spin_forever", "timeout"), ("data_race", "race")],
)
def test_race_builds_keep_hangs_apart_from_races(examples, go_tools, name, status):
    traced, _ = trace(examples[name], go_tools, runs=2, timeout_s=1.0, race=True)
    runs = traced.rows("go_runs")
    assert [run["status"] for run in runs] == [status, status], [run["stderr_tail"] for run in runs]
    if status != "race":
        assert not any("WARNING: DATA RACE" in (run["stderr_tail"] or "") for run in runs)
