"""Where one headless decision's time goes, per stage: ``python bench/results/issue30/engine_stages.py [N] [RUNS]``.

The loop of ``run_headless`` on the ``warren`` scenario with a clock read around each stage of a batch:
``advance`` (the wakes, completions and the observations' making), ``reads`` (the fields the forager reads,
built lazily: done first here so that ``decide`` finds them built), ``decide`` (the policy alone),
``validate`` and ``adjudicate``. The clock reads cost a little, so the sum is above the untimed run's figure
printed beside it. Medians over RUNS fresh runs (issue 30, bench/RESULTS.md).
"""

from __future__ import annotations

import gc
import statistics
import sys
from typing import Any

from warren_sim.engine import BUILD, run_headless
from warren_sim.engine.command import validate
from warren_sim.runtime.clock import wall_seconds
from warren_sim.scenarios import instantiate, load_scenario

STAGES = ("advance", "reads", "decide", "validate", "adjudicate")


def read_fields(obs: Any, policy: Any) -> None:
    """The fields the warren forager reads at this wake (none at its first: see its ``decide``)."""
    if obs.time < policy.shift and obs.reason == "start":
        return
    o = obs.view
    if not o["busy"]:
        for key in ("you", "objectives"):
            o[key]
        o["place"]["items"]


def staged(n: int) -> tuple[int, dict[str, float]]:
    """One run: its decisions and microseconds per decision in each stage."""
    sim, policies = instantiate(load_scenario("warren", {"agents": n}), 0, "solution", record=False)
    gc.collect()
    spent = dict.fromkeys(STAGES, 0.0)
    while True:
        t0 = wall_seconds()
        batch = sim.advance()
        t1 = wall_seconds()
        spent["advance"] += t1 - t0
        if batch is None:
            break
        for obs in batch.observations:
            read_fields(obs, policies[obs.agent_id])
        t2 = wall_seconds()
        answers = [(obs, policies[obs.agent_id].decide(obs)) for obs in batch.observations]
        t3 = wall_seconds()
        for obs, answer in answers:
            assert validate(sim, obs._agent, obs, answer) is None
            obs.answer, obs.source = answer, "policy"
        t4 = wall_seconds()
        sim.adjudicate()
        spent["adjudicate"] += wall_seconds() - t4
        spent["reads"] += t2 - t1
        spent["decide"] += t3 - t2
        spent["validate"] += t4 - t3
    d = sim.decisions
    return d, {k: v / d * 1e6 for k, v in spent.items()}


def untimed(n: int) -> float:
    """Microseconds per decision of ``run_headless`` itself, on a fresh run."""
    sim, policies = instantiate(load_scenario("warren", {"agents": n}), 0, "solution", record=False)
    gc.collect()
    t0 = wall_seconds()
    s = run_headless(sim, policies)
    return (wall_seconds() - t0) / s["decisions"] * 1e6


def main(n: int, runs: int) -> None:
    rows, plain = [], []
    decisions = 0
    for _ in range(runs):
        decisions, row = staged(n)
        rows.append(row)
        plain.append(untimed(n))
    med = {k: statistics.median(r[k] for r in rows) for k in STAGES}
    total = sum(med.values())
    print(f"build={BUILD} agents={n} decisions={decisions} runs={runs}")
    for k in STAGES:
        print(f"  {k:11s} {med[k]:6.2f} us  {med[k] / total * 100:5.1f}%")
    print(f"  sum         {total:6.2f} us; run_headless untimed: {statistics.median(plain):.2f} us/decision")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
