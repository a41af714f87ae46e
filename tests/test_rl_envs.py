"""warren_sim.rl passes PettingZoo's and Gymnasium's own checkers, and keeps WARREN's determinism.

The checkers are the libraries' real ones (``parallel_api_test``, ``parallel_seed_test``, ``check_env``);
pytest turns every warning into an error here, so a checker's warning (a live agent missing from a
step's dicts, a render fps, an observation outside its space) fails the test too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from pettingzoo.test import parallel_api_test, parallel_seed_test
from tiers import sizes

from warren_sim.engine import Simulation
from warren_sim.rl import COMPLETION_BONUS, env_id, gym_env, parallel_env, register_envs
from warren_sim.rl.driver import TEXT_CHARSET, progress
from warren_sim.scenarios import ScenarioError, list_scenarios, load_scenario

# Every bundled scenario; ``warren`` at a small size.
SCENARIOS = [("bridge_repair", {}), ("contention", {}), ("deadline", {}), ("relay", {}), ("warren", {"agents": 6})]
IDS = [s for s, _ in SCENARIOS]
REPO = Path(__file__).resolve().parents[1]


def test_every_bundled_scenario_is_covered():
    bundled = sorted(p.parent.name for p in (REPO / "scenarios").glob("*/scenario.toml"))
    assert sorted(IDS) == bundled


@pytest.mark.parametrize(("scenario", "params"), SCENARIOS, ids=IDS)
def test_pettingzoo_parallel_api_test(scenario, params):
    """PettingZoo's own API test, 1,000 cycles (actions sampled with the mask)."""
    parallel_api_test(parallel_env(scenario, **params), num_cycles=1000)


@pytest.mark.parametrize(("scenario", "params"), SCENARIOS, ids=IDS)
def test_pettingzoo_parallel_seed_test(scenario, params):
    """PettingZoo's own seed test (samples actions without the mask: out-of-range indices are noops)."""
    parallel_seed_test(lambda: parallel_env(scenario, **params))


@pytest.mark.parametrize(("scenario", "params"), SCENARIOS, ids=IDS)
def test_gymnasium_check_env_through_make(scenario, params):
    """``gymnasium.make`` finds the registered id; Gymnasium's ``check_env`` passes (render and close too)."""
    env = gymnasium.make(env_id(scenario), **params)
    assert env.unwrapped.spec.id == env_id(scenario)
    check_env(env.unwrapped)
    env.close()


def test_check_env_on_gym_env_directly_for_another_agent():
    env = gym_env("bridge_repair", "medic-1", seed=5)
    check_env(env, skip_render_check=True)  # no spec without gymnasium.make, so no alternative render modes
    assert env.agent == "medic-1"


def test_registered_ids_and_the_module_form_of_make():
    assert env_id("bridge_repair") == "warren/BridgeRepair-v0"
    for scenario in IDS:  # registered on import
        assert env_id(scenario) in gymnasium.registry
    # Scenarios found later (a $WARREN_SCENARIOS set after the import) are registered by register_envs().
    assert sorted(register_envs()) == sorted(env_id(s) for s in list_scenarios())
    assert all(env_id(s) in gymnasium.registry for s in list_scenarios())
    # Without importing warren_sim.rl first: Gymnasium imports the module named before the colon.
    code = ("import gymnasium; env = gymnasium.make('warren_sim.rl:warren/BridgeRepair-v0'); "
            "obs, info = env.reset(seed=3); print(info['observation_id'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "engineer-1#0"


def test_spaces_are_cached_and_shaped_as_documented():
    env = parallel_env("bridge_repair", max_actions=8)
    for a in env.possible_agents:
        assert env.observation_space(a) is env.observation_space(a)
        assert env.action_space(a) is env.action_space(a)
        assert env.action_space(a).n == 9
    assert env.observation_space("engineer-1") is not env.observation_space("courier-1")
    obs, infos = env.reset(seed=3)
    space = env.observation_space("engineer-1")
    for a in env.agents:
        assert obs[a] in space
        assert obs[a]["action_mask"].dtype == np.int8 and obs[a]["action_mask"].shape == (9,)
        assert obs[a]["features"].dtype == np.float32 and obs[a]["features"].shape == (4,)
        assert set(obs[a]["text"]) <= set(TEXT_CHARSET)
    assert env.metadata["name"] == "warren_bridge_repair_v0" and env.metadata["is_parallelizable"] is True


def test_index_i_is_the_ith_suggestion_in_affordance_order():
    env = parallel_env("bridge_repair", trace=True)
    obs, infos = env.reset(seed=3)
    awake = env.driver.awake["engineer-1"]
    flat = [{"action": a["action"], "args": s} for a in awake.affordances for s in a["suggestions"]]
    assert infos["engineer-1"]["suggestions"] == flat and len(flat) >= 2
    assert obs["engineer-1"]["action_mask"].tolist() == [1] * (len(flat) + 1) + [0] * (64 - len(flat))
    i = len(flat)  # the last one
    env.step({"engineer-1": i, "courier-1": 0, "medic-1": 0})
    commands = {r["agent"]: r["command"] for r in map(json.loads, env.trace_text().splitlines())
                if r["kind"] == "command"}
    assert commands == {"engineer-1": flat[i - 1], "courier-1": {"noop": True}, "medic-1": {"noop": True}}


def test_max_actions_caps_the_suggestions():
    env = parallel_env("bridge_repair", max_actions=1)
    obs, infos = env.reset(seed=3)
    assert all(len(infos[a]["suggestions"]) <= 1 for a in env.agents)
    assert obs["engineer-1"]["action_mask"].tolist() == [1, 1]


def test_out_of_range_and_malformed_actions_are_noops_never_errors():
    env = parallel_env("bridge_repair", max_actions=4, trace=True)
    env.reset(seed=3)
    env.step({"engineer-1": 10**9, "courier-1": -3, "medic-1": "take", "nobody": 1})
    env.step({"engineer-1": np.int64(999), "courier-1": None, "medic-1": 2.5})
    env.step({"engineer-1": True})
    commands = [r for r in map(json.loads, env.trace_text().splitlines()) if r["kind"] == "command"]
    assert commands and all(r["command"] == {"noop": True} and r["source"] == "policy" for r in commands)


def test_step_dicts_hold_the_live_agents_and_say_who_woke():
    """Every live agent is in every step's dicts (PettingZoo's test needs it); ``awake`` marks the batch."""
    env = parallel_env("bridge_repair")
    obs, infos = env.reset(seed=3)
    assert all(infos[a]["awake"] and infos[a]["reason"] == "start" for a in env.agents)
    rng = np.random.default_rng(0)
    seen_asleep = False
    for _ in range(40):
        actions = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, rewards, term, trunc, infos = env.step(actions)
        if not env.agents:
            break
        assert set(obs) == set(rewards) == set(term) == set(trunc) == set(infos) == set(env.possible_agents)
        batch = {o.agent_id for o in env.driver.sim.batch.observations}
        assert {a for a in infos if infos[a]["awake"]} == batch & set(env.possible_agents) != set()
        for a in env.agents:
            if not infos[a]["awake"]:
                seen_asleep = True
                assert obs[a]["action_mask"].tolist() == [1] + [0] * 64 and infos[a]["suggestions"] == []
            else:
                assert infos[a]["observation"]["time"] == env.driver.sim.time
    assert seen_asleep


def test_uncontrolled_agents_run_their_solution_policies_inside_the_step():
    env = parallel_env("bridge_repair", controlled=["courier-1"], trace=True)
    assert env.possible_agents == ["courier-1"]
    obs, infos = env.reset(seed=3)
    assert set(obs) == {"courier-1"}
    while env.agents:
        obs, rewards, term, trunc, infos = env.step({"courier-1": 0})
        assert set(obs) <= {"courier-1"}
    records = [json.loads(line) for line in env.trace_text().splitlines()]
    sources = {(r["agent"], r["source"]) for r in records if r["kind"] == "command"}
    assert ("engineer-1", "policy") in sources and ("medic-1", "policy") in sources
    assert sum(1 for r in records if r["kind"] == "command" and r["agent"] == "engineer-1") > 3


def test_reward_is_the_progress_change_plus_the_completion_bonus():
    env = parallel_env("contention")
    obs, _ = env.reset(seed=0)
    p0 = progress(env.driver.sim)
    rng = np.random.default_rng(0)
    total, rewards_seen = 0.0, []
    while env.agents:
        actions = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, rewards, term, trunc, _ = env.step(actions)
        assert len(set(rewards.values())) == 1  # a team reward
        rewards_seen.append(next(iter(rewards.values())))
        total += rewards_seen[-1]
    assert env.state_summary["status"] == "completed"
    assert all(term.values()) and not any(trunc.values())
    assert total == pytest.approx(1.0 - p0 + COMPLETION_BONUS)
    assert rewards_seen[-1] >= COMPLETION_BONUS and all(r >= 0 for r in rewards_seen)
    assert env.step({}) == ({}, {}, {}, {}, {})  # after the end: nothing left to step


def test_truncated_at_the_time_limit_terminated_at_a_missed_deadline():
    env = parallel_env("bridge_repair")
    env.reset(seed=1)
    while env.agents:
        _, _, term, trunc, _ = env.step({})  # nobody does anything: the time limit ends it
    assert all(trunc.values()) and not any(term.values())
    assert env.driver.sim.time == env.driver.sim.conv.time_limit_ms
    env = parallel_env("deadline")
    env.reset(seed=1)
    while env.agents:
        _, _, term, trunc, _ = env.step({})
    assert all(term.values()) and not any(trunc.values())
    assert "missed its deadline" in env.state_summary["reason"]


def _rollout(env, seed: int, action_seed: int):
    obs, infos = env.reset(seed=seed)
    out = [obs]
    rng = np.random.default_rng(action_seed)
    while env.agents:
        actions = {a: int(rng.integers(0, 6)) for a in env.agents}  # some in range, some not
        step = env.step(actions)
        obs = step[0]
        out.append(step)
    return out, env.trace_text()


@pytest.mark.parametrize(("scenario", "params"), [SCENARIOS[0], SCENARIOS[4]], ids=["bridge_repair", "warren"])
def test_same_seed_same_actions_identical_observations_rewards_and_trace_bytes(scenario, params):
    a, trace_a = _rollout(parallel_env(scenario, trace=True, **params), 7, 1)
    b, trace_b = _rollout(parallel_env(scenario, trace=True, **params), 7, 1)
    assert data_equivalence(a, b, exact=True)
    assert trace_a.encode() == trace_b.encode() and trace_a.count("\n") > 100
    c, trace_c = _rollout(parallel_env(scenario, trace=True, **params), 8, 1)
    assert trace_c != trace_a  # the seed is the engine's: another seed, another adjudication order


def test_the_trace_is_the_engine_trace_of_the_same_commands():
    """Replaying the env's recorded commands through a bare Simulation gives the same records."""
    env = parallel_env("bridge_repair", trace=True, controlled=["engineer-1", "medic-1"])
    _, trace = _rollout(env, 3, 2)
    records = [json.loads(line) for line in trace.splitlines()]
    commands = [(r["agent"], r["command"], r["source"]) for r in records if r["kind"] == "command"]
    sc = load_scenario("bridge_repair")
    sim = Simulation(sc.spec, 3, run_id="rl", params=sc.params)
    it = iter(commands)
    while (batch := sim.advance()) is not None:
        by_agent = {}
        for _ in batch.observations:
            aid, command, source = next(it)
            by_agent[aid] = (command, source)
        for obs in batch.observations:
            command, source = by_agent[obs.agent_id]
            sim.answer(obs.agent_id, command, source=source)
        sim.adjudicate()
    replayed = [{"cursor": i, **r} for i, r in enumerate(sim.drain_records())]
    assert [json.dumps(r, separators=(",", ":")) for r in replayed] == \
        [json.dumps(r, separators=(",", ":")) for r in records]


def test_reset_seeding_rules():
    env = parallel_env("relay", seed=11)
    obs1, _ = env.reset()
    assert env.episode_seed == 11
    env.reset()
    drawn = env.episode_seed
    assert drawn != 11
    env.reset(seed=11)
    env.reset()
    assert env.episode_seed == drawn  # seeds after an explicit one are drawn from a generator it seeded
    obs2, _ = env.reset(seed=11)
    assert data_equivalence(obs1, obs2, exact=True)
    unseeded = parallel_env("relay")
    unseeded.reset()
    assert unseeded.episode_seed == 0  # never given a seed: seed 0, reproducible by default


def test_gym_env_steps_until_the_agent_wakes_again():
    env = gym_env("bridge_repair", "engineer-1", seed=3, trace=True)
    obs, info = env.reset()
    times = [info["observation"]["time"]]
    for _ in range(20):
        mask = env.action_masks()
        assert mask.tolist() == obs["action_mask"].tolist()
        obs, reward, term, trunc, info = env.step(int(np.flatnonzero(mask)[-1]))
        if term or trunc:
            break
        assert info["awake"] is True
        times.append(info["observation"]["time"])
    assert times == sorted(times) and len(set(times)) == len(times)
    assert env.render() == info["text"]


def test_teaching_errors():
    with pytest.raises(ValueError, match="has no agent 'nobody'; its agents: engineer-1"):
        parallel_env("bridge_repair", controlled=["nobody"])
    with pytest.raises(ScenarioError, match="has no parameter 'agentz'"):
        parallel_env("warren", agentz=3)
    with pytest.raises(ValueError, match="render_mode must be one of"):
        gym_env("bridge_repair", render_mode="human")


@sizes(16, 64, 512, argname="agents")
def test_pettingzoo_tests_on_warren_with_many_controlled_agents(agents):
    """More live agents than any batch wakes: most are in the dicts with awake False (16; 64 slow; 512 soak)."""
    parallel_api_test(parallel_env("warren", agents=agents), num_cycles=1000)
    parallel_seed_test(lambda: parallel_env("warren", agents=agents))


def test_optional_packages_load_only_when_used():
    """The core never imports the [rl] packages; warren_sim.rl imports PettingZoo only for parallel_env."""
    code = ("import sys, warren_sim.cli, warren_sim.engine, warren_sim.scenarios, warren_sim.http.app\n"
            "assert not {'gymnasium', 'pettingzoo'} & set(sys.modules), sorted(sys.modules)\n"
            "import warren_sim.rl\n"
            "assert 'gymnasium' in sys.modules and 'pettingzoo' not in sys.modules\n"
            "warren_sim.rl.parallel_env('deadline')\n"
            "assert 'pettingzoo' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
