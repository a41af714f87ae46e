"""A Gymnasium ``Env`` for one controlled agent; every other agent runs its solution policy.

One ``step`` answers the agent's current wake and runs the engine on until the agent wakes again
(or the run ends): the reward is the team reward over that stretch. Spaces, observations, seeding
and the reward are those of the parallel env (``spaces.py``, ``driver.py``).
"""

from __future__ import annotations

import copy
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ..scenarios import load_scenario
from . import spaces as sp
from .driver import Driver

MAX_TEXT = 4096


class WarrenGymEnv(gym.Env[dict[str, Any], Any]):
    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # fps: ansi text has none; the checker wants one

    def __init__(self, scenario: str, agent: str | None = None, seed: int | None = None, max_actions: int = 64, *,
                 max_text: int = MAX_TEXT, trace: bool = False, others: str = "solution",
                 render_mode: str | None = None, **params: Any) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, "
                             f"got {render_mode!r}")
        loaded = load_scenario(scenario, params)
        agent = agent if agent is not None else loaded.spec.agents[0].id
        self.agent = agent
        self.driver = Driver(loaded, (agent,), max_actions, trace=trace, policy=others)
        self.max_text = max_text
        self.render_mode = render_mode
        self.observation_space = sp.observation_space(max_actions, max_text, loaded.spec.conventions.max_inventory)
        self.action_space = sp.action_space(max_actions)
        self._seed = seed
        self.episode_seed: int | None = None
        self._info: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Engine seed ``seed``; without one, the constructor's seed the first time (0 if none), then
        seeds drawn from ``self.np_random`` (seeded by the last explicit seed)."""
        if seed is None and self._np_random is None:
            seed = self._seed if self._seed is not None else 0
        super().reset(seed=seed)
        self.episode_seed = int(seed) if seed is not None else sp.next_seed(self.np_random)
        self.driver.start(self.episode_seed)
        obs, self._info = sp.observe(self.driver, self.agent, self.max_text)
        return obs, self._info

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        reward = float(self.driver.step({self.agent: action}))
        obs, self._info = sp.observe(self.driver, self.agent, self.max_text)
        ended = self.driver.ended
        truncated = ended and self.driver.truncated
        return obs, reward, ended and not truncated, truncated, self._info

    def fork(self) -> WarrenGymEnv:
        """An independent env at this env's state (see ``WarrenParallelEnv.fork``): the same actions give both
        the same observations and rewards; stepping one never changes the other. On an env from
        ``gymnasium.make``, fork its ``unwrapped`` env."""
        new = copy.copy(self)
        new.driver = self.driver.fork()
        new._np_random = copy.deepcopy(self._np_random)
        new.observation_space = copy.deepcopy(self.observation_space)
        new.action_space = copy.deepcopy(self.action_space)
        new._info = copy.deepcopy(self._info)
        return new

    def render(self) -> str | None:
        """The text of the agent's current envelope (or of the end)."""
        return self._info.get("text") if self._info else None

    def close(self) -> None:
        self.driver.sim = None

    def action_masks(self) -> np.ndarray:
        """The current action mask (the name sb3-contrib's MaskablePPO looks for)."""
        mask = np.zeros(self.driver.max_actions + 1, dtype=np.int8)
        mask[0] = 1
        mask[1:len(self.driver.choices.get(self.agent, [])) + 1] = 1
        return mask

    def trace_text(self) -> str:
        """The episode's engine records as JSON Lines (needs ``trace=True``)."""
        return self.driver.trace_text()


def gym_env(scenario: str, agent: str | None = None, seed: int | None = None, max_actions: int = 64,
            **kwargs: Any) -> WarrenGymEnv:
    """A Gymnasium ``Env`` of ``scenario`` controlling ``agent`` (default: the scenario's first agent).

    Keyword options: ``max_text``, ``trace``, ``others``, ``render_mode``; anything else is a
    scenario parameter (``agents=8`` for ``warren``).
    """
    return WarrenGymEnv(scenario, agent, seed, max_actions, **kwargs)
