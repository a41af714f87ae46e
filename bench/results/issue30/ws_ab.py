"""Issue 30's WebSocket rows for two trees, alternated round by round in one session (bench/RESULTS.md).

Usage: ``python bench/results/issue30/ws_ab.py BEFORE_TREE AFTER_TREE ROUNDS OUT.json`` from the repository
root. Each round runs, for each tree in turn, a child ``python -c`` with the tree as its working directory and
first on ``PYTHONPATH`` (so its ``warren serve`` and its ``bench`` are that tree's): ``warren serve`` and the
rows ``ws-one-sleep``, ``ws-1-sleep``, ``ws-one`` (echo), each 3 s, through ``bench.ws.measure`` (the same
code as ``python -m bench ws``), then OpenEnv's 64 and 1 sessions beside them through ``bench.openenv_peer``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROUND = r"""
import json, sys, tempfile
from pathlib import Path
from bench import openenv_peer
from bench.common import warren_serve
from bench.ws import AGENTS, SCENARIOS, measure
got = {}
with tempfile.TemporaryDirectory() as tmp, warren_serve(*SCENARIOS) as warren:
    for mode in ("ws-one-sleep", "ws-1-sleep", "ws-one"):
        got[mode] = measure(mode, warren.url, warren.pid, 3.0)
    root = openenv_peer.generate(Path(tmp), AGENTS)
    peer = openenv_peer.serve(root)
    try:
        for name, sessions in (("openenv-64", AGENTS), ("openenv-1", 1)):
            got[name] = openenv_peer.drive(peer.url, root, sessions, 3.0, peer.pid, timeout=120)
    finally:
        peer.stop()
print(json.dumps(got))
"""

FIGURES = ("decisions_per_s", "server_cpu_us_per_decision", "client_cpu_us_per_decision")


def one_round(tree: str) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=tree)
    done = subprocess.run([sys.executable, "-c", ROUND], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=900)
    if done.returncode:
        raise RuntimeError(f"the round in {tree} failed: {done.stderr[-3000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {mode: {f: r.get(f) for f in FIGURES} for mode, r in got.items()}


def main() -> None:
    before, after, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    results: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
    for i in range(rounds):
        for name, tree in (("before", before), ("after", after)) if i % 2 == 0 else (("after", after),
                                                                                       ("before", before)):
            r = one_round(tree)
            results[name].append(r)
            sleep, one, peer64, peer1 = r["ws-one-sleep"], r["ws-1-sleep"], r["openenv-64"], r["openenv-1"]
            print(f"round {i} {name}: ws-one-sleep/openenv-64 {sleep['decisions_per_s'] / peer64['decisions_per_s']:.3f}"
                  f" ({sleep['decisions_per_s']:.0f} vs {peer64['decisions_per_s']:.0f}/s; server "
                  f"{sleep['server_cpu_us_per_decision']:.0f} us, client {sleep['client_cpu_us_per_decision']:.0f} us)"
                  f", ws-1-sleep/openenv-1 {one['decisions_per_s'] / peer1['decisions_per_s']:.3f}, ws-one echo "
                  f"{r['ws-one']['decisions_per_s']:.0f}/s", flush=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"loadavg_after": os.getloadavg(), **results}, f, indent=1)


if __name__ == "__main__":
    main()
