"""The seeded stochastic debugger policy (docs/architecture.md §7): trajectories over one trace's state trees.

Guarantees:
- Deterministic: trajectory j of a (trace, direction) depends only on (seed, trace id, direction, j) and
  the config — its RNG is seeded from a SHA-256 of those (never Python's `hash()`), and it uses only
  `Random.random()`, whose stream is stable across Python versions. Asking for more trajectories (a
  larger k) leaves the first ones unchanged.
- Each trajectory draws one mixture component (weight-proportional), then each action from that
  component, until it reaches the exit (forward) / the entry pseudo-state (inverse) or `max_actions`
  actions were taken (exit "cut").
- Breakpoint targets: with probability `breakpoint_miss_rate`, a line text that does not come again (a
  code line never executed as a line event, or one whose last execution is behind) — the breakpoint
  then lands on the exit; otherwise a line text that comes again, uniform over distinct texts. When one
  kind has no candidate the other is used; with neither, the action becomes `continue`.
- Repository traces (`source_kind == "repo"`, with `sample_repo_entry`): each trajectory starts at a call
  node drawn uniformly from the trace (a forward walk starts at that call, an inverse walk at that
  activation's end). Function traces start at the entry call / the entry's return.
"""

import hashlib
import json
import random
from bisect import bisect_right
from dataclasses import asdict, dataclass
from functools import cached_property, partial
from typing import NamedTuple

from pipeline.debugger.actions import (
    FORWARD_ACTIONS,
    INVERSE_ACTIONS,
    breakpoint_,
    continue_,
    inv_step_into,
    step_into,
    step_return,
)
from pipeline.debugger.events import Trace
from pipeline.debugger.language import Action, Episode, serialize
from pipeline.debugger.render import forward_episode, inverse_episode
from pipeline.debugger.trees import ForwardTree, InverseTree, build_forward, build_inverse

DIRECTIONS = ("forward", "inverse")

_PLAIN_ACTIONS = {name: Action(name) for name in FORWARD_ACTIONS + INVERSE_ACTIONS if name != "breakpoint"}

DEFAULT_FORWARD = (
    (0.5, (("step_into", 0.35), ("step_over", 0.30), ("step_return", 0.20), ("breakpoint", 0.10), ("continue", 0.05))),
    (0.5, (("step_into", 0.5), ("step_over", 0.5))),
)
DEFAULT_INVERSE = ((1.0, (("inv_step_into", 0.5), ("inv_step_over", 0.35), ("inv_step_call", 0.15))),)


class _Chooser:
    """A weight-proportional choice among fixed values, one `rng.random()` per draw."""

    __slots__ = ("bounds", "values", "total")

    def __init__(self, choices):
        self.values = [value for weight, value in choices if weight > 0]
        self.bounds, running = [], 0.0
        for weight, _ in choices:
            if weight > 0:
                running += weight
                self.bounds.append(running)
        self.total = running

    def __call__(self, rng: random.Random):
        at = bisect_right(self.bounds, rng.random() * self.total)
        return self.values[min(at, len(self.values) - 1)]


@dataclass(frozen=True)
class PolicyConfig:
    """Every choice of the policy and of the text; `policy_version` (version + a hash of all values) goes in
    each row. `version` 2: the CWM frame grammar of schemas/trajectories.md (1: the layout before it)."""

    version: str = "2"
    forward_mixture: tuple = DEFAULT_FORWARD
    inverse_mixture: tuple = DEFAULT_INVERSE
    breakpoint_miss_rate: float = 0.2
    max_actions: int = 64
    sample_repo_entry: bool = True
    directions: tuple = DIRECTIONS
    locals_delta: bool = True  # the tracegen locals delta (`".."`); False: full locals in every frame, as CWM

    def __post_init__(self):
        if not isinstance(self.version, str) or not self.version:
            raise ValueError("version must be a non-empty string")
        _check_mixture("forward_mixture", self.forward_mixture, FORWARD_ACTIONS)
        _check_mixture("inverse_mixture", self.inverse_mixture, INVERSE_ACTIONS)
        if not 0.0 <= self.breakpoint_miss_rate <= 1.0:
            raise ValueError(f"breakpoint_miss_rate must be in [0, 1], got {self.breakpoint_miss_rate!r}")
        if type(self.locals_delta) is not bool:
            raise ValueError(f"locals_delta must be a bool, got {self.locals_delta!r}")
        if type(self.max_actions) is not int or self.max_actions < 1:
            raise ValueError(f"max_actions must be a positive int, got {self.max_actions!r}")
        if (
            not self.directions
            or any(d not in DIRECTIONS for d in self.directions)
            or len(set(self.directions)) != len(self.directions)
        ):
            raise ValueError(f"directions must be distinct values of {DIRECTIONS}, got {self.directions!r}")

    @cached_property
    def choosers(self) -> dict:
        """{direction: chooser of a component, itself a chooser of actions}, built once."""
        return {
            direction: _Chooser(
                [(float(weight), _Chooser([(float(p), a) for a, p in actions])) for weight, actions in mixture]
            )
            for direction, mixture in (("forward", self.forward_mixture), ("inverse", self.inverse_mixture))
        }

    @cached_property
    def policy_version(self) -> str:
        values = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return f"{self.version}-{hashlib.sha256(values.encode()).hexdigest()[:10]}"


def _check_mixture(name: str, mixture, allowed: tuple) -> None:
    try:
        components = [(float(weight), [(str(a), float(p)) for a, p in actions]) for weight, actions in mixture]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be ((weight, ((action, probability), ...)), ...)") from None
    if not components or sum(w for w, _ in components) <= 0:
        raise ValueError(f"{name} needs a component with a positive weight")
    for weight, actions in components:
        if weight < 0 or not actions or any(p < 0 for _, p in actions) or sum(p for _, p in actions) <= 0:
            raise ValueError(f"{name}: weights and probabilities must be >= 0 with a positive sum")
        for action, _ in actions:
            if action not in allowed:
                raise ValueError(f"{name}: unknown action {action!r}; allowed: {', '.join(allowed)}")


class Trajectory(NamedTuple):
    """One sampled trajectory: what its `trajectories` row holds, plus the structured episode."""

    trajectory_id: str
    trace_id: str
    source_id: str
    direction: str
    seed: int
    policy_version: str
    sample_index: int
    actions: tuple  # of language.Action
    nodes: tuple  # visited node indices in the direction's tree
    exit: str  # forward: normal|error|never; inverse: entry; either: cut
    episode: Episode
    text: str


class TraceWalker:
    """The trees of one trace plus the breakpoint candidates, built once for all its trajectories."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.forward: ForwardTree = build_forward(trace)
        self._inverse: InverseTree | None = None
        by_last = sorted((lines[-1], text) for text, lines in self.forward.lines_by_source.items())
        self._lasts = [last for last, _ in by_last]
        self._texts = [text for _, text in by_last]
        executed = self.forward.lines_by_source
        self._never = list(
            dict.fromkeys(
                line
                for line in trace.code.splitlines()
                if line.strip() and not line.lstrip().startswith("#") and line not in executed
            )
        )
        self._calls = [i for i, kind in enumerate(trace.kinds) if kind == "call"]
        self._moves: dict = {}

    def moves(self, direction: str) -> dict:
        """{action: node -> node} for every action of a direction but breakpoint, bound to the tree."""
        moves = self._moves.get(direction)
        if moves is None:
            if direction == "forward":
                tree = self.forward
                moves = {
                    "step_into": partial(step_into, tree),
                    "step_over": tree.over.__getitem__,
                    "step_return": partial(step_return, tree),
                    "continue": partial(continue_, tree),
                }
            else:
                tree = self.inverse
                moves = {
                    "inv_step_into": partial(inv_step_into, tree),
                    "inv_step_over": tree.over.__getitem__,
                    "inv_step_call": tree.call.__getitem__,
                }
            self._moves[direction] = moves
        return moves

    @property
    def inverse(self) -> InverseTree:
        if self._inverse is None:
            self._inverse = build_inverse(self.trace, self.forward)
        return self._inverse

    def breakpoint_target(self, node: int, rng: random.Random, miss_rate: float) -> str | None:
        cut = bisect_right(self._lasts, node)  # texts [cut:] come again after node, [:cut] do not
        n_hits, n_misses = len(self._texts) - cut, cut + len(self._never)
        want_miss = rng.random() < miss_rate
        pick = rng.random()
        if n_misses and (want_miss or not n_hits):
            index = int(pick * n_misses)
            return self._texts[index] if index < cut else self._never[index - cut]
        if n_hits:
            return self._texts[cut + int(pick * n_hits)]
        return None

    def start(self, direction: str, rng: random.Random, config: PolicyConfig) -> int:
        repo = config.sample_repo_entry and self.trace.source_kind == "repo"
        if direction == "forward":
            return self._calls[int(rng.random() * len(self._calls))] if repo else 0
        if repo:
            end = self.forward.act_end[self._calls[int(rng.random() * len(self._calls))]]
            if end != -1:
                return self.inverse.of_event[end]
        return 0


def _rng(seed: int, trace_id: str, direction: str, index: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{trace_id}\x00{direction}\x00{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def sample_one(walker: TraceWalker, config: PolicyConfig, seed: int, direction: str, index: int) -> Trajectory:
    """Trajectory `index` of one trace in one direction."""
    trace = walker.trace
    rng = _rng(seed, trace.trace_id, direction, index)
    forward = direction == "forward"
    component = config.choosers[direction](rng)
    node = walker.start(direction, rng, config)
    end = walker.forward.n if forward else walker.inverse.entry
    nodes, actions = [node], []
    moves = walker.moves(direction)
    limit = config.max_actions
    uniform, bounds, values, total = rng.random, component.bounds, component.values, component.total
    last = len(values) - 1
    while node != end and len(actions) < limit:
        name = values[min(bisect_right(bounds, uniform() * total), last)]  # = component(rng), inlined
        if name == "breakpoint":
            target = walker.breakpoint_target(node, rng, config.breakpoint_miss_rate)
            if target is None:
                name = "continue"
            else:
                node = breakpoint_(walker.forward, node, target)
                actions.append(Action(name, target))
                nodes.append(node)
                continue
        node = moves[name](node)
        actions.append(_PLAIN_ACTIONS[name])
        nodes.append(node)
    if forward:
        episode = forward_episode(trace, walker.forward, nodes, actions, delta=config.locals_delta)
        exit_ = trace.exit if node == end else "cut"
    else:
        episode = inverse_episode(trace, walker.forward, walker.inverse, nodes, actions, delta=config.locals_delta)
        exit_ = "entry" if node == end else "cut"
    version = config.policy_version
    key = f"{trace.trace_id}\x00{direction}\x00{seed}\x00{version}\x00{index}"
    return Trajectory(
        trajectory_id=hashlib.sha256(key.encode()).hexdigest()[:32],
        trace_id=trace.trace_id,
        source_id=trace.source_id,
        direction=direction,
        seed=seed,
        policy_version=version,
        sample_index=index,
        actions=tuple(actions),
        nodes=tuple(nodes),
        exit=exit_,
        episode=episode,
        text=serialize(episode),
    )


def sample_trajectories(trace: Trace | dict, config: PolicyConfig, seed: int, k: int) -> list[Trajectory]:
    """k trajectories per direction of `config.directions`, in (direction, index) order.

    `trace` is a `Trace` or a `traces` row (normalised here); a bad trace raises TraceShapeError.
    """
    if type(k) is not int or k < 0:
        raise ValueError(f"k must be a non-negative int, got {k!r}")
    if isinstance(trace, dict):
        trace = Trace.from_row(trace)
    walker = TraceWalker(trace)
    return [sample_one(walker, config, seed, direction, index) for direction in config.directions for index in range(k)]
