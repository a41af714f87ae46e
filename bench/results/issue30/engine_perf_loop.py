"""The headless runs ``engine_perf.sh`` samples: R fresh ``warren`` runs of N agents, built first (not sampled).

Usage: ``python engine_perf_loop.py N R READY``. Once every run is built (and the garbage collector frozen, so
that the R-1 runs waiting their turn do not make collections dearer than in ``bench engine``, where one run is
alive), it writes its pid to the file READY and waits a second for ``perf record -p`` to attach.
"""

from __future__ import annotations

import gc
import os
import sys
import time

from warren_sim.engine import run_headless
from warren_sim.scenarios import instantiate, load_scenario

n, runs, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
built = [instantiate(load_scenario("warren", {"agents": n}), 0, "solution", record=False) for _ in range(runs)]
gc.collect()
gc.freeze()
with open(ready, "w", encoding="utf-8") as f:
    f.write(str(os.getpid()))
time.sleep(1.0)  # not the simulation's time: a pause for the profiler to attach
for sim, policies in built:
    run_headless(sim, policies)
