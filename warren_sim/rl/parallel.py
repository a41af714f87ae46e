"""A PettingZoo ``ParallelEnv`` over the in-process engine (no server, no trio).

``agents`` holds every controlled agent while the run lives, and every step's dicts hold all of
them: PettingZoo's own ``parallel_api_test`` requires that a live agent appear in each step's dicts
and that an agent leave ``agents`` only by terminating or truncating. An agent that did not wake in
the step's batch (busy or asleep) is there with ``infos[agent]["awake"] = False`` and a mask that
allows only the noop; its action is ignored. See docs/rl.md.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from ..scenarios import load_scenario
from . import spaces as sp
from .driver import Driver

MAX_TEXT = 4096


class WarrenParallelEnv(ParallelEnv[str, dict[str, Any], Any]):
    """One scenario, some (by default all) of its agents controlled by the caller, the others on a policy."""

    metadata = {"name": "warren_v0", "is_parallelizable": True, "render_modes": ["ansi"]}

    def __init__(self, scenario: str, seed: int | None = None, controlled: Iterable[str] | None = None,
                 max_actions: int = 64, *, max_text: int = MAX_TEXT, trace: bool = False,
                 others: str = "solution", **params: Any) -> None:
        loaded = load_scenario(scenario, params)
        ids = [a.id for a in loaded.spec.agents]
        wanted = tuple(ids if controlled is None else ([controlled] if isinstance(controlled, str) else controlled))
        self.driver = Driver(loaded, wanted, max_actions, trace=trace, policy=others)
        self.metadata = {**self.metadata, "name": f"warren_{loaded.name}_v0"}
        self.render_mode = "ansi"
        self.possible_agents: list[str] = list(self.driver.controlled)
        self.agents: list[str] = []
        self.max_actions = max_actions
        self.max_text = max_text
        self._seed = seed
        self._np_random: np.random.Generator | None = None
        self.episode_seed: int | None = None
        capacity = loaded.spec.conventions.max_inventory
        # One space object per agent, made once: PettingZoo's tests and action seeding need the same
        # object on every call (a per-instance cache, unlike lru_cache on a method, dies with the env).
        self._obs_spaces = {a: sp.observation_space(max_actions, max_text, capacity) for a in self.possible_agents}
        self._act_spaces = {a: sp.action_space(max_actions) for a in self.possible_agents}
        self._infos: dict[str, dict[str, Any]] = {}

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._act_spaces[agent]

    def reset(self, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """A new episode: engine seed ``seed``; without one, the constructor's seed the first time
        (0 if none), then seeds drawn from a generator seeded by the last explicit seed."""
        if seed is None and self._np_random is None:
            seed = self._seed if self._seed is not None else 0
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
            self.episode_seed = int(seed)
        else:
            assert self._np_random is not None
            self.episode_seed = sp.next_seed(self._np_random)
        self.driver.start(self.episode_seed)
        self.agents = list(self.possible_agents)
        observations, infos = self._observe(self.agents)
        return observations, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float], dict[str, bool],
                                                     dict[str, bool], dict[str, Any]]:
        if not self.agents:
            return {}, {}, {}, {}, {}
        reward = float(self.driver.step(actions))
        live = self.agents
        observations, infos = self._observe(live)
        rewards = dict.fromkeys(live, reward)
        ended = self.driver.ended
        truncated = ended and self.driver.truncated
        terminations = dict.fromkeys(live, ended and not truncated)
        truncations = dict.fromkeys(live, truncated)
        if ended:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _observe(self, agents: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        observations, infos = {}, {}
        for aid in agents:
            observations[aid], infos[aid] = sp.observe(self.driver, aid, self.max_text)
        self._infos = infos
        return observations, infos

    def fork(self) -> WarrenParallelEnv:
        """An independent env at this env's state: the same episode at the same step (the engine copied by
        ``Simulation.fork``, without replaying), the same seed generator and spaces' generators, so that the
        same actions (and resets) give both the same observations, rewards and records. Stepping one never
        changes the other. docs/fork.md, "In process"."""
        new = copy.copy(self)
        new.driver = self.driver.fork()
        new.agents = list(self.agents)
        new.possible_agents = list(self.possible_agents)
        new.metadata = dict(self.metadata)
        new._np_random = copy.deepcopy(self._np_random)
        new._obs_spaces = copy.deepcopy(self._obs_spaces)
        new._act_spaces = copy.deepcopy(self._act_spaces)
        new._infos = copy.deepcopy(self._infos)
        return new

    def render(self) -> str:
        """The texts of the envelopes of the current batch (agents that woke), one after another."""
        return "\n\n".join(info["text"] for info in self._infos.values() if info["awake"]) or \
            "\n".join(info["text"] for info in self._infos.values())

    def close(self) -> None:
        self.driver.sim = None
        self.agents = []

    def trace_text(self) -> str:
        """The episode's engine records as JSON Lines (needs ``trace=True``): ``warren run --trace``'s bytes."""
        return self.driver.trace_text()

    @property
    def state_summary(self) -> dict[str, Any]:
        """The engine's summary of the episode (status, reason, sim time, decisions, objectives)."""
        sim = self.driver.sim
        return sim.summary() if sim is not None else {}


def parallel_env(scenario: str, seed: int | None = None, controlled: Iterable[str] | None = None,
                 max_actions: int = 64, **params: Any) -> WarrenParallelEnv:
    """A PettingZoo ``ParallelEnv`` of ``scenario`` (the ``*_v0.parallel_env()`` convention).

    ``controlled``: agent ids the caller acts for (default: all); the others run their solution
    policies inside each step. ``params`` are the scenario's parameters (``agents=8`` for ``warren``);
    ``max_text``, ``trace`` and ``others`` (the uncontrolled agents' policy) are keyword options.
    """
    return WarrenParallelEnv(scenario, seed, controlled, max_actions, **params)
