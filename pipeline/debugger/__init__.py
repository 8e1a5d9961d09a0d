"""The neural-debugger MDP (docs/architecture.md §7–8): state trees, actions, the sampling policy, the formal language.

Modules, one job each: `events` (normalise a trace row), `trees` (forward and inverse state trees as flat
arrays), `actions` (the transitions and their edge cases), `policy` (seeded sampling of trajectories),
`render` (visited nodes -> states with locals deltas), `language` (serializer, parser, pretty printer).
"""

from pipeline.debugger.actions import apply_forward, apply_inverse
from pipeline.debugger.events import Trace, TraceShapeError
from pipeline.debugger.language import Action, Episode, LanguageError, State, parse, pretty, serialize
from pipeline.debugger.policy import PolicyConfig, Trajectory, sample_trajectories
from pipeline.debugger.trees import build_forward, build_inverse

__all__ = [
    "Action",
    "Episode",
    "LanguageError",
    "PolicyConfig",
    "State",
    "Trace",
    "TraceShapeError",
    "Trajectory",
    "apply_forward",
    "apply_inverse",
    "build_forward",
    "build_inverse",
    "parse",
    "pretty",
    "sample_trajectories",
    "serialize",
]
