"""engine: headless decisions/s of the ``warren`` scenario next to a SimPy replay of the same wakes.

For each size N, one run with records gives every agent's wake times (its ``observation`` records); then,
alternating within each repeat so both see the same machine noise:

- the engine: ``run_headless`` on a fresh ``instantiate(..., record=False)`` (building is not timed, as in
  ``warren run``), decisions / wall seconds;
- SimPy: N processes, process i replaying agent i's intervals between wakes with ``env.timeout``, doing
  nothing else; events (wakes, the start included) / wall seconds of ``env.run()``.

The ratio decisions/s : SimPy events/s says what share of a bare event loop's speed the engine keeps while
doing everything else (observations, policies, validation, adjudication). Target (issue 14): >= 0.15 at 1,000
agents. The table and the JSON say which build of the engine ran (``warren_sim.engine.BUILD``: "mypyc", what
an install compiles where it can, or "python"; setup.py); on a compiled install the plain build is measured too,
in a child process (``WARREN_ENGINE=python``), as information: the target is judged on the build installed. Both sides are also timed in CPU seconds of this process (``getrusage``), and that ratio is shown
next to the wall one: on a shared machine a process waits for a core, and the wait lands on whichever side
was running; CPU time counts only the work.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import Options, fmt_stat, print_table, summary, target, targets_table
from warren_sim.engine import BUILD, WHY, run_headless
from warren_sim.runtime.clock import wall_seconds
from warren_sim.scenarios import instantiate, load_scenario

TARGET_AGENTS = 1000
TARGET_RATIO = 0.15
ROOT = Path(__file__).resolve().parents[1]


def wake_intervals(n: int, seed: int = 0) -> tuple[list[list[int]], int]:
    """Per agent (in id order), the intervals between its wakes, from a recorded run; and the decisions."""
    sim, policies = instantiate(load_scenario("warren", {"agents": n}), seed, "solution", record=True)
    wakes: dict[str, list[int]] = {aid: [] for aid in sim.world.agent_ids}

    def collect(s: Any) -> None:
        for r in s.drain_records():
            if r["kind"] == "observation":
                wakes[r["agent"]].append(r["t"])

    summary_ = run_headless(sim, policies, on_batch=collect)
    collect(sim)
    out = []
    for aid, times in wakes.items():
        assert times and times[0] == 0, f"{aid} does not wake at t=0 ('start'): {times[:3]}"
        out.append([b - a for a, b in zip(times, times[1:], strict=False)])
    return out, summary_["decisions"]


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (not a clock: the work done, whatever the waiting)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_engine(n: int, seed: int = 0) -> tuple[float, int, float]:
    """(wall seconds, decisions, CPU seconds) of one headless run, building not included."""
    sim, policies = instantiate(load_scenario("warren", {"agents": n}), seed, "solution", record=False)
    gc.collect()
    c0, t0 = cpu_seconds(), wall_seconds()
    s = run_headless(sim, policies)
    return wall_seconds() - t0, s["decisions"], cpu_seconds() - c0


def time_simpy(intervals: list[list[int]]) -> tuple[float, int, float]:
    import simpy

    env = simpy.Environment()
    woke = [0]

    def forager(env: simpy.Environment, steps: list[int]) -> Iterator[Any]:
        woke[0] += 1  # the first wake (t=0, "start")
        for dt in steps:
            yield env.timeout(dt)
            woke[0] += 1

    for steps in intervals:
        env.process(forager(env, steps))
    gc.collect()
    c0, t0 = cpu_seconds(), wall_seconds()
    env.run()
    return wall_seconds() - t0, woke[0], cpu_seconds() - c0


def profile_engine(n: int, path: Any) -> None:
    from pyinstrument import Profiler

    sim, policies = instantiate(load_scenario("warren", {"agents": n}), 0, "solution", record=False)
    prof = Profiler(interval=0.0005)
    prof.start()
    run_headless(sim, policies)
    prof.stop()
    path.write_text(prof.output_text(unicode=False, color=False, show_all=False), encoding="utf-8")


def calls_per_decision(n: int) -> float:
    """Function calls (Python and C, as cProfile counts them) per decision of one headless run.

    Deterministic, unlike any timing on a shared machine: the count of calls is what the engine's work per
    decision is made of in CPython, so it shows progress that the noise of a busy machine hides.
    """
    import cProfile
    import pstats

    sim, policies = instantiate(load_scenario("warren", {"agents": n}), 0, "solution", record=False)
    prof = cProfile.Profile()
    prof.enable()
    s = run_headless(sim, policies)
    prof.disable()
    return float(pstats.Stats(prof).total_calls) / s["decisions"]  # type: ignore[attr-defined]


def measure(n: int, reps: int) -> dict[str, Any]:
    """One size: ``reps`` engine runs and SimPy replays, alternated; rates and their ratios (medians, min-max)."""
    intervals, decisions = wake_intervals(n)
    wakes = sum(len(s) + 1 for s in intervals)
    eng, sp, ratio, cpu_ratio = [], [], [], []
    for _ in range(reps):
        t_e, d, c_e = time_engine(n)
        t_s, w, c_s = time_simpy(intervals)
        assert d == decisions and w == wakes == decisions, (d, w, wakes, decisions)
        eng.append(d / t_e)
        sp.append(w / t_s)
        ratio.append((d / t_e) / (w / t_s))
        if c_e > 0 and c_s > 0:
            cpu_ratio.append(c_s / c_e)  # same count of decisions and events: the ratio of their rates
    return {"agents": n, "decisions": decisions, "simpy_events": wakes, "repeats": reps, "build": BUILD,
            "decisions_per_s": summary(eng), "simpy_events_per_s": summary(sp), "ratio": summary(ratio),
            "cpu_ratio": summary(cpu_ratio or [float("nan")])}


def row(res: dict[str, Any]) -> list[str]:
    return [f"{res['agents']:,}", f"{res['decisions']:,}", fmt_stat(res["decisions_per_s"]),
            fmt_stat(res["simpy_events_per_s"]), fmt_stat(res["ratio"], 3), fmt_stat(res["cpu_ratio"], 3)]


def measure_plain(n: int, reps: int) -> dict[str, Any]:
    """:func:`measure` in a child process running the plain Python engine (``WARREN_ENGINE=python``): on a
    compiled install, what an install without a C compiler would make, in the same run."""
    code = f"import json; from bench.engine import measure; print(json.dumps(measure({n}, {reps})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "WARREN_ENGINE": "python"},
                         capture_output=True, text=True, timeout=1800, check=True)
    res: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    assert res["build"] == "python", res
    return res


HEADERS = ["agents", "decisions", "engine decisions/s", "SimPy events/s", "ratio (wall)", "ratio (CPU)"]


def run(opts: Options) -> dict[str, Any]:
    sizes = [100, 1000] if opts.quick else [100, 1000, 10_000]
    reps = opts.reps(3)
    results = [measure(n, reps) for n in sizes]
    built = f"{BUILD} build" + (f"; {WHY}" if WHY else "")
    print_table(f"engine ({built}): warren scenario headless vs SimPy replay ({reps} repeat(s); median (min-max))",
                HEADERS, [row(r) for r in results])
    plain = None
    if BUILD == "mypyc":
        plain = measure_plain(TARGET_AGENTS, reps)
        print_table(f"engine, the plain Python build beside it (WARREN_ENGINE=python, a child process; {reps} "
                    "repeat(s)): what an install without a C compiler makes", HEADERS, [row(plain)])
    at = next(r for r in results if r["agents"] == TARGET_AGENTS)
    targets = [target(f"engine:SimPy ratio at {TARGET_AGENTS:,} agents", at["ratio"]["median"], ">=", TARGET_RATIO)]
    targets_table(targets)
    out: dict[str, Any] = {"build": BUILD, "why": WHY, "results": results, "plain": plain, "targets": targets}
    if opts.profile:
        path = opts.out / "engine_profile.txt"
        opts.out.mkdir(parents=True, exist_ok=True)
        profile_engine(TARGET_AGENTS, path)
        out["profile"] = str(path)
        out["calls_per_decision"] = calls = calls_per_decision(TARGET_AGENTS)
        print(f"profile: {path}; {calls:.1f} function calls per decision at {TARGET_AGENTS:,} agents (cProfile)")
    return out
