"""Building blocks for partner populations: a scenario's solution, changed in one way a focal agent must handle.

A population file (``scenarios/<name>/populations/NAME.py``, or any ``NAME.py`` in an organiser's held-out
directory) is a policy file like any other: ``factory(agent_id, role, briefing[, rng]) -> policy``. Most
bundled ones are the scenario's own solution with one change, so they are written with these wrappers:
:class:`Noisy` (a seeded share of random choices), :class:`Slow` (a pause before every action) and
:class:`Quiet` (never speaks). :func:`sibling_solution` loads the ``solution.py`` next to the population's
folder, so a population file needs no import path. Wrappers read only the observation, as every policy does.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType
from typing import Any

_SOLUTIONS: dict[str, ModuleType] = {}


def sibling_solution(population_file: str) -> ModuleType:
    """The ``solution.py`` of the scenario whose ``populations/`` folder holds ``population_file`` (loaded once)."""
    path = Path(population_file).resolve().parents[1] / "solution.py"
    key = str(path)
    if key not in _SOLUTIONS:
        spec = importlib.util.spec_from_file_location(f"warren_partner_solution_{path.parent.name}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no solution.py at {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _SOLUTIONS[key] = module
    return _SOLUTIONS[key]


class Noisy:
    """The base policy, except that a seeded ``share`` of its decisions is a random suggestion (or a noop)."""

    def __init__(self, base: Any, rng: random.Random, share: float = 0.3) -> None:
        self.base, self.rng, self.share = base, rng, share

    def decide(self, obs: Any) -> dict[str, Any]:
        decision: dict[str, Any] = self.base.decide(obs)  # the base keeps its own state up to date
        if self.rng.random() >= self.share:
            return decision
        options = [(a["action"], s) for a in obs.affordances for s in a["suggestions"]]
        if not options:
            return {"noop": True}
        action, args = options[self.rng.randrange(len(options))]
        return {"action": action, "args": dict(args)}


class Slow:
    """The base policy, acting ``pause_ms`` after it decides: every action waits that long (a message that
    wakes it earlier does not hurry it). The base sees every observation, so it misses no message."""

    def __init__(self, base: Any, pause_ms: int = 5000) -> None:
        self.base, self.pause_ms = base, pause_ms
        self.queue: list[dict[str, Any]] = []
        self.ready_at = 0

    def decide(self, obs: Any) -> dict[str, Any]:
        decision: dict[str, Any] = self.base.decide(obs)
        if "action" in decision and decision not in self.queue:
            if not self.queue:
                self.ready_at = obs.time + self.pause_ms
            self.queue.append(decision)
        elif not self.queue:
            return decision  # a sleep or a noop needs no thought
        if obs.time >= self.ready_at:
            action = self.queue.pop(0)
            if self.queue:
                self.ready_at = obs.time + self.pause_ms
            return action
        return {"sleep_ms": self.ready_at - obs.time}


class Quiet:
    """The base policy, minus every ``say`` and ``tell``: it never tells anyone anything."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def decide(self, obs: Any) -> dict[str, Any]:
        decision: dict[str, Any] = self.base.decide(obs)
        if decision.get("action") in ("say", "tell"):
            return {"noop": True}
        return decision
