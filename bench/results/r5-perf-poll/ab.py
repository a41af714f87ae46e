"""A/B of the one-GET-per-agent scale pass: servers from two trees, alternated, the same (this tree's) load process.

``python bench/results/r5-perf-poll/ab.py --tree before=/tmp/pp-main --tree after=. --client lean --rounds 3``
(from the repo root, with the branch's venv). Each round runs every tree once, in order; each run is one
``bench.scale.served(n)``: a fresh server from that tree (its working directory and PYTHONPATH, so its own
``warren_sim``), this tree's ``bench.loadgen scale``. Prints one JSON line per run and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import bench.common as common  # noqa: E402
from bench import scale  # noqa: E402


class _TreeServer(common.ServerProcess):
    tree: Path = common.REPO

    def __init__(self, argv: list[str], **kw: object) -> None:
        saved = common.REPO
        common.REPO = self.tree  # read by Popen's cwd and bench_env's PYTHONPATH, in __init__ only
        try:
            super().__init__(argv, **kw)  # type: ignore[arg-type]
        finally:
            common.REPO = saved


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", action="append", required=True, help="NAME=PATH")
    p.add_argument("--client", default="lean")
    p.add_argument("--poll", default="single")
    p.add_argument("--agents", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-answers", action="store_true", help="the lean client's pass without its noop answers")
    args = p.parse_args()
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree]
    scale.ServerProcess = _TreeServer  # type: ignore[misc]
    for r in range(args.rounds):
        for name, tree in trees:
            _TreeServer.tree = tree
            load0 = os.getloadavg()[0]
            out = scale.served(args.agents, poll=args.poll, poll_client=args.client, answers=not args.no_answers)
            lat = out["wake_latency_ms"]
            print(json.dumps({"round": r, "server": name, "client": args.client, "poll": args.poll,
                              "load1_before": load0, "load1_after": os.getloadavg()[0],
                              "first": lat["min"], "p50": lat["p50"], "p99": lat["p99"], "max": lat["max"],
                              "n": lat["n"], "statuses": out["statuses"], "not_measured": out["not_measured"],
                              "answer_phase_s": out["answer_phase_s"], "peak_kib": out["server_rss"]["peak_kib"]}),
                  flush=True)


if __name__ == "__main__":
    main()
