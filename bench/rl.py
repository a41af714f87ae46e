"""rl: the PettingZoo adapter's agent-steps/s next to the headless engine's decisions/s, in the same run.

The ``warren`` scenario with 64 foragers; the first K of them (K = 1, 16, 64) are controlled, the others
run their solution policies. Alternating within each repeat so both see the same machine noise:

- env: ``warren_sim.rl.parallel_env`` for a whole episode, each awake controlled agent choosing the index
  the engine's ``RandomPolicy`` (same per-agent seed) would choose among ``infos[agent]["suggestions"]``, so the
  env and the headless runs play the same episode (asserted: the same number of decisions);
  agent-steps/s = controlled agents' decisions / wall seconds, engine decisions/s = every decision of the run
  (controlled + uncontrolled) / wall seconds, env steps/s = ``step()`` calls / wall seconds;
- headless (bare): ``run_headless`` on the same scenario and seed, the K agents on the engine's
  ``RandomPolicy`` (a random suggestion or a noop, from the affordances only), the others on the solution;
- headless (reading): the same, but the K random policies also read ``obs.observation`` and ``obs.text``:
  the engine work the env's observations need (the envelope text, the structured observation in infos).

ratio (bare) = env decisions/s : headless-bare decisions/s is what an RL user pays for the adapter and its
observations; ratio (same work) = env : headless-reading isolates the adapter itself (spaces, numpy arrays,
the dicts of every live agent each step, the step loop). Target: same-work ratio >= 0.5 at 64 controlled
(``--quick``: K = 1 and 16 only, the target read at 16).
"""

from __future__ import annotations

import gc
import random
from typing import Any

from bench.common import Options, fmt_stat, print_table, summary, target, targets_table
from warren_sim.engine import RandomPolicy, run_headless
from warren_sim.runtime.clock import wall_seconds
from warren_sim.scenarios import instantiate, load_scenario, resolve_policy

AGENTS = 64
CONTROLLED = (1, 16, 64)
TARGET_RATIO = 0.5


class ReadingRandom(RandomPolicy):
    """RandomPolicy that first reads what an RL observation carries (the text and the structured observation)."""

    def decide(self, obs: Any) -> dict[str, Any]:
        _ = obs.observation, obs.text
        return super().decide(obs)


def controlled_ids(k: int) -> list[str]:
    return [a.id for a in load_scenario("warren", {"agents": AGENTS}).spec.agents][:k]


def random_index(rng: random.Random, suggestions: list[Any]) -> int:
    """The action index of ``RandomPolicy.decide``'s choice (0 = its noop), drawing as it draws."""
    if not suggestions or rng.random() < 0.2:
        return 0
    return rng.randrange(len(suggestions)) + 1


def time_env(k: int, seed: int) -> tuple[float, int, int, int]:
    from warren_sim.rl import parallel_env

    env = parallel_env("warren", controlled=controlled_ids(k), agents=AGENTS)
    rngs = {a: random.Random(seed * 1_000_003 + sum(map(ord, a))) for a in env.possible_agents}
    gc.collect()
    t0 = wall_seconds()
    _, infos = env.reset(seed=seed)
    steps = 0
    while env.agents:
        actions = {a: random_index(rngs[a], infos[a]["suggestions"]) for a in env.agents if infos[a]["awake"]}
        infos = env.step(actions)[4]
        steps += 1
    wall = wall_seconds() - t0
    return wall, env.driver.controlled_decisions, env.state_summary["decisions"], steps


def time_headless(k: int, seed: int, reading: bool) -> tuple[float, int]:
    sc = load_scenario("warren", {"agents": AGENTS})
    ids = set(controlled_ids(k))
    kind = ReadingRandom if reading else RandomPolicy
    solution = resolve_policy("solution", sc, seed)

    def factory(agent_id: str, role: str, brief: dict[str, Any]) -> Any:
        return kind(seed * 1_000_003 + sum(map(ord, agent_id))) if agent_id in ids else solution(agent_id, role, brief)

    sim, policies = instantiate(sc, seed, factory, record=False)
    gc.collect()
    t0 = wall_seconds()
    s = run_headless(sim, policies)
    return wall_seconds() - t0, s["decisions"]


def run(opts: Options) -> dict[str, Any]:
    reps = opts.reps(5, 1)
    seeds = range(reps)
    sizes = CONTROLLED[:2] if opts.quick else CONTROLLED  # --quick: K = 1, 16 (K = 64 is most of the time)
    rows, results = [], []
    for k in sizes:
        agent_steps, env_dps, env_steps, bare, reading, ratio_bare, ratio_same = [], [], [], [], [], [], []
        for seed in seeds:
            wall, controlled, decisions, steps = time_env(k, seed)
            t_b, d_b = time_headless(k, seed, reading=False)
            t_r, d_r = time_headless(k, seed, reading=True)
            assert decisions == d_b == d_r, f"not the same episode: env {decisions}, headless {d_b} and {d_r}"
            agent_steps.append(controlled / wall)
            env_dps.append(decisions / wall)
            env_steps.append(steps / wall)
            bare.append(d_b / t_b)
            reading.append(d_r / t_r)
            ratio_bare.append(env_dps[-1] / bare[-1])
            ratio_same.append(env_dps[-1] / reading[-1])
        res = {"controlled": k, "agents": AGENTS, "repeats": reps, "agent_steps_per_s": summary(agent_steps),
               "env_steps_per_s": summary(env_steps), "env_decisions_per_s": summary(env_dps),
               "headless_bare_decisions_per_s": summary(bare), "headless_reading_decisions_per_s": summary(reading),
               "ratio_bare": summary(ratio_bare), "ratio_same_work": summary(ratio_same)}
        results.append(res)
        rows.append([str(k), fmt_stat(res["agent_steps_per_s"]), fmt_stat(res["env_steps_per_s"]),
                     fmt_stat(res["env_decisions_per_s"]), fmt_stat(res["headless_bare_decisions_per_s"]),
                     fmt_stat(res["headless_reading_decisions_per_s"]), fmt_stat(res["ratio_bare"], 3),
                     fmt_stat(res["ratio_same_work"], 3)])
    print_table(f"rl: parallel_env on warren ({AGENTS} foragers, K controlled, RandomPolicy choices) vs headless "
                f"({reps} seed(s); median (min-max))",
                ["K", "agent-steps/s", "env steps/s", "env decisions/s", "headless bare", "headless reading",
                 "ratio bare", "ratio same work"], rows)
    at = results[-1]  # K = 64 (16 with --quick)
    targets = [target(f"env:headless-reading decisions/s at {at['controlled']} controlled",
                      at["ratio_same_work"]["median"], ">=", TARGET_RATIO)]
    targets_table(targets)
    return {"results": results, "targets": targets}
