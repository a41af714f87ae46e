"""The policy interface: an observation in, one command out.

A policy is any object with ``decide(observation) -> command``; a scenario's ``solution.py``
provides ``make_policy(agent_id, role, briefing) -> Policy``. The observation is duck-typed
(``agent_id, observation_id, seq, time, reason, observation, affordances, text``) so the same
policy drives an agent headless, as an NPC inside a served run, or remotely through the SDK.
"""

from __future__ import annotations

from typing import Any, Protocol

NOOP: dict[str, Any] = {"noop": True}


class ObservationLike(Protocol):
    """What a policy may read. Read-only properties, so that the engine's lazy ``Observation`` (computed
    properties, slots), the SDK's frozen models and a plain object with attributes all satisfy it: a policy
    reads an observation, it never assigns to one."""

    @property
    def agent_id(self) -> str: ...
    @property
    def observation_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def time(self) -> int: ...
    @property
    def reason(self) -> str: ...
    @property
    def observation(self) -> dict[str, Any]: ...
    @property
    def affordances(self) -> list[dict[str, Any]]: ...
    @property
    def text(self) -> str: ...


class Policy(Protocol):
    def decide(self, obs: ObservationLike) -> dict[str, Any]: ...


class NoopPolicy:
    """What an unassigned agent does: nothing, without ever blocking anyone."""

    def decide(self, obs: ObservationLike) -> dict[str, Any]:
        return dict(NOOP)

    def recall(self, obs: ObservationLike, command: dict[str, Any]) -> None:
        """A fork brings it to its fork point (warren_sim.fork): it keeps no state, so nothing to recall."""


class RandomPolicy:
    """Picks a random suggestion (or a noop) from the affordances with its own seeded RNG."""

    def __init__(self, seed: int) -> None:
        import random

        self.rng = random.Random(seed)

    def decide(self, obs: ObservationLike) -> dict[str, Any]:
        options = [(a["action"], s) for a in obs.affordances for s in a["suggestions"]]
        if not options or self.rng.random() < 0.2:
            return dict(NOOP)
        action, args = options[self.rng.randrange(len(options))]
        return {"action": action, "args": dict(args)}


def fork_policies(policies: dict[str, Any]) -> dict[str, Any]:
    """Independent copies of a run's policies, for a fork of the run (``Simulation.fork``): each policy's own
    ``fork()`` if it has one, else one ``copy.deepcopy`` of all the others together (so that policies sharing an
    object, a team's plan, still share one copy of it). A policy that can be neither is a ``TypeError`` saying
    which, never a policy shared by two runs (its state would mix both futures)."""
    import copy

    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for aid, policy in policies.items():
        own = getattr(policy, "fork", None)
        if callable(own):
            out[aid] = own()
        else:
            rest[aid] = policy
    try:
        out.update(copy.deepcopy(rest))
    except Exception as exc:
        for aid, policy in rest.items():  # name the first one that does not copy
            try:
                copy.deepcopy(policy)
            except Exception:
                raise TypeError(f"the policy of {aid} ({type(policy).__name__}) cannot be copied for a fork "
                                f"({exc!r:.120}): give it a fork() method that returns an independent copy of it"
                                ) from exc
        raise
    return {aid: out[aid] for aid in policies}
