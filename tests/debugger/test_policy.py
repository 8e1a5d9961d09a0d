"""The sampling policy over state trees: where trajectories start, breakpoint targets, the action mix, and
traces too deep for recursion."""

from collections import Counter

from debugger_helpers import WORKED_EXAMPLE, synthetic_row, trace_row

from pipeline.debugger import PolicyConfig, Trace, build_forward, build_inverse, sample_trajectories


def test_deep_recursion_and_long_traces_do_not_hit_the_recursion_limit():
    depth = 5000
    events = []
    for level in range(depth):
        events.append(
            {"event": "call", "frame_id": level, "source": "def f(n):", "locals": [("n", str(level))], "arg": None}
        )
        events.append(
            {
                "event": "line",
                "frame_id": level,
                "source": "    return f(n - 1)",
                "locals": [("n", str(level))],
                "arg": None,
            }
        )
    for level in reversed(range(depth)):
        events.append(
            {
                "event": "return",
                "frame_id": level,
                "source": "    return f(n - 1)",
                "locals": [("n", str(level))],
                "arg": "0",
            }
        )
    trace = Trace.from_row({"trace_id": "deep", "exit": "normal", "events": events, "code": ""})
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    assert len(inv.kind) == len(events) + (depth - 1) + 1  # every line but the deepest made a call
    assert sample_trajectories(trace, PolicyConfig(), 0, 2)


def test_repository_traces_start_at_a_sampled_call():
    row = synthetic_row(11, repo=True)
    trace = Trace.from_row(row)
    calls = {i for i, kind in enumerate(trace.kinds) if kind == "call"}
    fwd = build_forward(trace)
    inv = build_inverse(trace, fwd)
    starts = {t.nodes[0] for t in sample_trajectories(trace, PolicyConfig(), 5, 30) if t.direction == "forward"}
    assert starts <= calls and len(starts) > 1
    inverse_starts = {t.nodes[0] for t in sample_trajectories(trace, PolicyConfig(), 5, 30) if t.direction == "inverse"}
    assert all(inv.kind[k] in ("inv_return", "inv_exception") or k == 0 for k in inverse_starts)
    function_row = dict(row, source_kind="function")
    assert {t.nodes[0] for t in sample_trajectories(function_row, PolicyConfig(), 5, 10)} == {0}


def test_breakpoints_target_both_lines_that_come_again_and_lines_that_do_not():
    trace = Trace.from_row(trace_row(WORKED_EXAMPLE, "f", "3", trace_id="w"))
    config = PolicyConfig(forward_mixture=((1.0, (("breakpoint", 1.0),)),), directions=("forward",))
    hits = misses = 0
    for trajectory in sample_trajectories(trace, config, 1, 200):
        for action, landing in zip(trajectory.actions, trajectory.nodes[1:], strict=True):
            if landing == len(trace):
                misses += 1
            else:
                hits += 1
                assert trace.sources[landing] == action.target
    assert hits > 50 and misses > 20


def test_the_action_mix_follows_the_default_mixture():
    trace = Trace.from_row(synthetic_row(2, max_events=400))
    mix = Counter()
    for trajectory in sample_trajectories(trace, PolicyConfig(directions=("forward",)), 0, 300):
        mix.update(action.name for action in trajectory.actions)
    total = sum(mix.values())
    # default: into .425, over .40, return .10, breakpoint .05, continue .025 (per-trajectory components
    # make short trajectories favour continue-free walks, so only rough bounds)
    assert 0.3 < mix["step_into"] / total < 0.55 and 0.3 < mix["step_over"] / total < 0.55
    assert mix["step_return"] and mix["breakpoint"] and mix["continue"]
