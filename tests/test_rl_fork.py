"""``env.fork()`` of the RL adapters (warren_sim.rl): an independent env at the same state, with the same future
given the same actions, checked with PettingZoo's and Gymnasium's own checkers on forked envs."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from pettingzoo.test import parallel_api_test, parallel_seed_test

from warren_sim.rl import gym_env, parallel_env
from warren_sim.scenarios import list_scenarios

PARAMS = {"warren": {"agents": 6}}


def _masked(observations: dict[str, Any], rng: random.Random) -> dict[str, int]:
    return {aid: int(rng.choice(np.flatnonzero(o["action_mask"]))) for aid, o in observations.items()}


def _walk(env: Any, observations: dict[str, Any], rng: random.Random, steps: int) -> tuple[list[Any], dict[str, Any]]:
    """``steps`` steps (or to the end) with masked random actions: what each step gave, and the last observations."""
    out = []
    for _ in range(steps):
        if not env.agents:
            break
        result = env.step(_masked(observations, rng))
        observations = result[0]
        out.append(result)
    return out, observations


@pytest.mark.parametrize("scenario", list_scenarios())
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_forked_env_given_the_same_actions_gives_the_same_future(scenario, seed):
    env = parallel_env(scenario, **PARAMS.get(scenario, {}))
    env.driver.trace = True
    observations, _ = env.reset(seed=seed)
    _, observations = _walk(env, observations, random.Random(seed), 5 + seed)
    forked = env.fork()
    assert forked.agents == env.agents and forked.driver.sim is not env.driver.sim
    mine, _ = _walk(env, observations, random.Random(100 + seed), 400)
    theirs, _ = _walk(forked, observations, random.Random(100 + seed), 400)
    assert mine and data_equivalence(mine, theirs)
    assert forked.trace_text() == env.trace_text()
    assert forked.state_summary == env.state_summary
    # and after the episode, the same seedless reset: the env's seed generator was copied too
    assert data_equivalence(env.reset(), forked.reset())


@pytest.mark.parametrize("scenario", list_scenarios())
def test_other_actions_on_a_fork_leave_the_original_untouched(scenario):
    env = parallel_env(scenario, **PARAMS.get(scenario, {}))
    env.driver.trace = True
    observations, _ = env.reset(seed=4)
    _, observations = _walk(env, observations, random.Random(4), 6)
    reference = env.fork()
    astray = env.fork()
    elsewhere, _ = _walk(astray, observations, random.Random(999), 400)  # other actions, to the episode's end
    assert elsewhere
    mine, _ = _walk(env, observations, random.Random(7), 400)
    again, _ = _walk(reference, observations, random.Random(7), 400)
    assert data_equivalence(mine, again)
    assert env.trace_text() == reference.trace_text()
    assert astray.trace_text() != env.trace_text()


def _mid_episode(scenario: str, steps: int = 4) -> Any:
    env = parallel_env(scenario, **PARAMS.get(scenario, {}))
    observations, _ = env.reset(seed=2)
    _walk(env, observations, random.Random(2), steps)
    return env


@pytest.mark.parametrize("scenario", list_scenarios())
def test_pettingzoo_api_and_seed_tests_on_a_forked_env(scenario):
    parallel_api_test(_mid_episode(scenario).fork(), num_cycles=1000)
    parallel_seed_test(lambda: _mid_episode(scenario).fork())


def test_gymnasium_check_env_on_a_forked_env_and_the_same_future():
    env = gym_env("bridge_repair", "medic-1", seed=5)
    obs, _ = env.reset(seed=5)
    rng = random.Random(5)
    for _ in range(3):
        obs, *_ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    forked = env.fork()
    assert forked.agent == env.agent and forked.driver.sim is not env.driver.sim
    a, b = random.Random(8), random.Random(8)
    for _ in range(50):
        one = env.step(int(a.choice(np.flatnonzero(env.action_masks()))))
        two = forked.step(int(b.choice(np.flatnonzero(forked.action_masks()))))
        assert data_equivalence(one, two)
        if one[2] or one[3]:
            break
    check_env(env.fork(), skip_render_check=True)
