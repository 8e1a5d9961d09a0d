"""The evaluation's baselines on a hand-made trajectory: each prediction and each score worked out by hand."""

from pipeline.debugger.language import Action, Episode, State
from pipeline.evaluation.baselines import baseline_states, neighbour_line
from pipeline.evaluation.evaluate import Board

CODE = "def f(x):\n    y = x + 1\n\n    return y\n"
STATES = (
    State("call", "def f(x):", {"x": "1"}),
    State("line", "    y = x + 1", {"x": "1"}),
    State("line", "    return y", {"x": "1", "y": "2"}),
    State("return", "    return y", {}, "2"),
    State("exit_normal"),
)
EPISODE = Episode(CODE, STATES, (Action("step_into"), *[Action("step_over")] * 3), 0)
# the last locals written before each cut (a valued state writes none)
WRITTEN = ({"x": "1"}, {"x": "1"}, {"x": "1", "y": "2"}, {"x": "1", "y": "2"})


def test_the_neighbour_line_skips_blank_lines_and_stays_put_at_the_ends():
    lines = CODE.splitlines()
    assert neighbour_line(lines, "    y = x + 1", 1) == "    return y"
    assert neighbour_line(lines, "    return y", -1) == "    y = x + 1"
    assert neighbour_line(lines, "    return y", 1) == "    return y"
    assert neighbour_line(lines, "not in the code", 1) == "not in the code"


def test_the_baselines_predict_what_their_definitions_say():
    first = baseline_states(EPISODE, 0, WRITTEN[0])
    assert first["copy"] == STATES[0]
    assert first["next_line"] == State("line", "    y = x + 1", {"x": "1"})
    assert first["oracle_structure"] == State("line", "    y = x + 1", {"x": "1"})
    at_return = baseline_states(EPISODE, 2, WRITTEN[2])
    assert at_return["oracle_structure"] == State("return", "    return y", {})  # the value is left to predict
    assert baseline_states(EPISODE, 3, WRITTEN[3])["oracle_structure"] == State("exit_normal")
    inverse = Episode(CODE, (STATES[2], STATES[1]), (Action("inv_step_over"),), 0)
    assert baseline_states(inverse, 0, WRITTEN[2])["next_line"] == State("inv_line", "    y = x + 1", WRITTEN[2])


def test_the_baselines_score_exactly_as_worked_out_by_hand():
    boards = {name: Board() for name in ("copy", "next_line", "oracle_structure")}
    for k, written in enumerate(WRITTEN):
        for name, guess in baseline_states(EPISODE, k, written).items():
            boards[name].add(EPISODE.actions[k].name, k, guess, STATES[k + 1])
    third = 1 / 3
    expected = {
        "copy": {
            "step_into": {"cuts": 1, "state": 0.0, "event": 0.0, "source": 0.0, "locals": 1.0, "arg": 1.0},
            "step_over": {"cuts": 3, "state": 0.0, "event": third, "source": third, "locals": third, "arg": third},
        },
        "next_line": {
            "step_into": {"cuts": 1, "state": 1.0, "event": 1.0, "source": 1.0, "locals": 1.0, "arg": 1.0},
            "step_over": {
                "cuts": 3,
                "state": 0.0,
                "event": third,
                "source": 2 * third,
                "locals": 0.0,
                "arg": 2 * third,
            },
        },
        "oracle_structure": {
            "step_into": {"cuts": 1, "state": 1.0, "event": 1.0, "source": 1.0, "locals": 1.0, "arg": 1.0},
            "step_over": {
                "cuts": 3,
                "state": third,
                "event": 1.0,
                "source": 1.0,
                "locals": 2 * third,
                "arg": 2 * third,
            },
        },
    }
    assert {name: board.results()["per_action"] for name, board in boards.items()} == expected
