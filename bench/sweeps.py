"""sweeps: seeds per second of ``warren eval`` in this process (``--jobs 1``), on local worker processes
(``--jobs 2``) and on a local Ray (``--ray``), and the scaling ratios against ``--jobs 1``.

Two workloads: ``warren`` at 100 agents (about 50 ms of engine work per seed: what parallelism is for) and
``contention`` (about 3 ms per seed: the per-seed overhead of each backend shows). The three backends run
the same sweep interleaved within each repeat, so they see the same noise; each sweep goes through
:func:`warren_sim.evaluation.evaluate` exactly as ``warren eval`` does, and its report, without the
wall-clock fields, must be identical to the ``--jobs 1`` one (checked here, every time). A process pool is
built per sweep, so its start-up is in the figure (a user pays it); Ray's start-up (``ray.init``) is paid
once and reported separately, as a session is usually long-lived (a notebook, a cluster).

On a cluster (not measured here), the same sweep: ``ray start --head`` on one node, ``ray start
--address=HEAD:6379`` on the others, then ``warren eval warren --seeds 0-1999 --param agents=100 --ray
--address auto --out sweep.jsonl`` on the head (docs/evaluation.md).
"""

from __future__ import annotations

from typing import Any

from bench.common import Options, fmt_stat, print_table, summary, target, targets_table
from warren_sim.evaluation import default_jobs, evaluate, without_wall
from warren_sim.runtime.clock import wall_seconds

WORKLOADS = [  # (label, scenario, params, seeds full, seeds quick)
    ("warren, 100 agents", "warren", {"agents": 100}, 160, 16),
    ("contention", "contention", {}, 400, 40),
]
MODES = [("jobs 1", {"jobs": 1}), ("jobs 2", {"jobs": 2}), ("ray", {"backend": "ray"})]
SCALING_TARGET = 1.6  # seeds/s at 2 workers vs 1, on 2 cores, for the heavy workload


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat ((0, 0) where there is none)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def once(scenario: str, params: dict[str, Any], seeds: int, mode: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    t0 = wall_seconds()
    report = evaluate(scenario, range(seeds), params=params, clock=wall_seconds, **mode)
    return seeds / (wall_seconds() - t0), report


def run(opts: Options) -> dict[str, Any]:
    import ray

    reps = opts.reps(3, 1)
    cores = default_jobs()
    t0 = wall_seconds()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    ray_init_s = wall_seconds() - t0
    results = []
    try:
        # Once per process, not per sweep: Ray's first tasks start its workers, the first pool starts the
        # forkserver (about 0.5 s; a `warren eval --jobs N` invocation pays it once).
        once("contention", {}, 4, {"backend": "ray"})
        once("contention", {}, 4, {"jobs": 2})
        for label, scenario, params, full, quick in WORKLOADS:
            seeds = quick if opts.quick else full
            rates: dict[str, list[float]] = {name: [] for name, _ in MODES}
            busy0, total0 = cpu_jiffies()
            for _ in range(reps):
                baseline = None
                for name, mode in MODES:
                    rate, report = once(scenario, params, seeds, mode)
                    rates[name].append(rate)
                    if baseline is None:
                        baseline = without_wall(report)
                    elif without_wall(report) != baseline:
                        raise RuntimeError(f"{label}: the {name} report differs from the jobs 1 one")
            busy1, total1 = cpu_jiffies()
            # How busy the whole machine was (ours and everyone else's work): scaling needs idle cores.
            busy_share = (busy1 - busy0) / (total1 - total0) if total1 > total0 else float("nan")
            ratios = {name: summary(r / b for r, b in zip(rates[name], rates["jobs 1"], strict=True))
                      for name, _ in MODES[1:]}
            results.append({"workload": label, "scenario": scenario, "params": params, "seeds": seeds,
                            "seeds_per_s": {name: summary(v) for name, v in rates.items()},
                            "ratio_vs_jobs_1": ratios, "machine_busy_share": busy_share})
    finally:
        ray.shutdown()
    rows = []
    for r in results:
        s = r["seeds_per_s"]
        rows.append([r["workload"], str(r["seeds"]), fmt_stat(s["jobs 1"], 1), fmt_stat(s["jobs 2"], 1),
                     fmt_stat(s["ray"], 1), fmt_stat(r["ratio_vs_jobs_1"]["jobs 2"], 2),
                     fmt_stat(r["ratio_vs_jobs_1"]["ray"], 2), f"{100 * r['machine_busy_share']:.0f}%"])
    print_table(f"sweeps: seeds/s by backend ({reps} repeat(s), {cores} cores; median (min-max)); "
                f"ray.init took {ray_init_s:.1f} s, not counted",
                ["workload", "seeds", "jobs 1", "jobs 2", "ray (2 CPUs)", "jobs 2 / jobs 1", "ray / jobs 1",
                 "machine busy"], rows)
    heavy = results[0]["ratio_vs_jobs_1"]
    targets = [target("warren 100 agents: jobs 2 / jobs 1 seeds/s", heavy["jobs 2"]["median"], ">=", SCALING_TARGET),
               target("warren 100 agents: ray / jobs 1 seeds/s", heavy["ray"]["median"], ">=", SCALING_TARGET)]
    targets_table(targets)
    return {"cores": cores, "ray_init_s": ray_init_s, "results": results, "targets": targets,
            "cluster_command": "ray start --head; ray start --address=HEAD:6379 (each other node); "
                               "warren eval warren --seeds 0-1999 --param agents=100 --ray --address auto "
                               "--out sweep.jsonl"}
