"""The trajectory report `tracegen inspect` prints: the action mix, lengths, a histogram, an example per direction."""

from debugger_helpers import WORKED_EXAMPLE, synthetic_row, trace_row

from pipeline.debugger.trajectory_summary import trajectory_report
from pipeline.stages.trajectories import SamplingSettings, sample_trajectories_stage


def test_the_report_shows_the_mix_lengths_histogram_and_one_example_per_direction():
    traces = [trace_row(WORKED_EXAMPLE, "f", "3", trace_id="w"), synthetic_row(4)]
    rows = sample_trajectories_stage(traces, SamplingSettings(seed=7, per_trace=3), "unit-0").rows("trajectories")
    text = "\n".join(trajectory_report(rows))
    assert "action mix: " in text and "token-length histogram" in text and "states per trajectory" in text
    assert "example forward trajectory" in text and "example inverse trajectory" in text
    assert "<|exit_normal|>" in text and "<|inv_exit_entry|>" in text
    assert trajectory_report([]) == ["trajectories: none"]
