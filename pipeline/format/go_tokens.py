"""The Go documents' special tokens (pipeline/format/go_examples.py, go_trajectories.py): the tokenizer adds each
as one id, and the loader and evaluation read the outcome tokens' ids."""

from schemas.go_next_event import OUTCOMES

OUTCOME_TOKENS = {name: f"<|go_{name}|>" for name in OUTCOMES}
GO_PROGRAM, GO_FILE, GO_EVENTS, GO_NEXT, GO_END = (
    "<|go_program|>",
    "<|go_file|>",
    "<|go_events|>",
    "<|go_next|>",
    "<|go_end|>",
)
GO_ROLLOUT = "<|go_rollout|>"  # starts the steps of a trajectory window (pipeline/format/go_trajectories.py)
GO_TOKENS: tuple[str, ...] = (GO_PROGRAM, GO_FILE, GO_EVENTS, GO_NEXT, GO_END, *OUTCOME_TOKENS.values(), GO_ROLLOUT)
