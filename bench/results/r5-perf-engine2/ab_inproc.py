"""A/B of two checkouts' engines in ONE process, run alternately: CPU microseconds per decision, per-pair ratios.

Usage (from anywhere, with the worktree's venv)::

    python bench/results/r5-perf-engine2/ab_inproc.py /tmp/main-tree /path/to/branch [pairs] [agents]

Each tree's ``warren_sim`` modules are imported once and kept apart (``sys.modules`` is swapped before each run,
for the engine's few lazy imports); both load the same scenario files (the editable install's). Each pair runs
A then B, or B then A (alternating), on a fresh ``instantiate`` of the ``warren`` scenario (not timed), and its
ratio A/B is taken at once, so a drift of the shared machine's speed hits both sides of a pair alike. Used for
bench/results/r5-perf-engine2.md; works for two compiled (mypyc) trees as well.
"""

from __future__ import annotations

import gc
import importlib
import resource
import statistics
import sys
from typing import Any

PREFIXES = ("warren_sim", "warren_scenario_")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def ours(name: str) -> bool:
    return name == "warren_sim" or name.startswith(("warren_sim.", "warren_scenario_"))


def load(path: str, base: list[str]) -> tuple[dict[str, Any], Any, Any]:
    for k in [k for k in sys.modules if ours(k)]:
        del sys.modules[k]
    sys.path[:] = [path, *base]
    eng = importlib.import_module("warren_sim.engine")
    sc = importlib.import_module("warren_sim.scenarios")
    assert eng.__file__ is not None and eng.__file__.startswith(path), (eng.__file__, path)
    return {k: v for k, v in sys.modules.items() if ours(k)}, eng, sc


def main() -> None:
    trees = {"A": sys.argv[1], "B": sys.argv[2]}
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    base = list(sys.path)
    mods = {name: load(path, base) for name, path in trees.items()}

    def run(name: str) -> float:
        table, eng, sc = mods[name]
        sys.modules.update(table)
        sim, pol = sc.instantiate(sc.load_scenario("warren", {"agents": n}), 0, "solution", record=False)
        gc.collect()
        c0 = cpu()
        s = eng.run_headless(sim, pol)
        return (cpu() - c0) / s["decisions"] * 1e6

    for name in mods:  # warm up
        run(name)
    res: dict[str, list[float]] = {k: [] for k in mods}
    ratios = []
    for i in range(pairs):
        got = {k: run(k) for k in (("A", "B") if i % 2 == 0 else ("B", "A"))}
        for k, v in got.items():
            res[k].append(v)
        ratios.append(got["A"] / got["B"])
    for k, v in res.items():
        print(f"{k} ({trees[k]}, {mods[k][1].BUILD}): median {statistics.median(v):.2f} us/decision "
              f"(min {min(v):.2f}, max {max(v):.2f})")
    q = statistics.quantiles(ratios, n=4)
    print(f"A/B per pair: median {statistics.median(ratios):.3f} (IQR {q[0]:.3f}-{q[2]:.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}), {pairs} pairs of {n:,} agents")


if __name__ == "__main__":
    main()
