"""Memory bounded by live work (DESIGN section 11): a `warren serve` process serves N NPC-only `warren` runs of
A agents back to back; its RSS is read after each run ended. Before issue 13 every ended run stayed in memory
(about 100 MiB per 5,000-agent run); now an ended run is read from disk, so the curve stays flat.

``python -m bench.memory [--runs 100] [--agents 5000] [--out bench/out] [--run-bound 900]`` prints the curve and
writes ``OUT/memory.json``. The baseline, side by side in the same process: the RSS after the first run.

Bounded: a run still going after ``--run-bound`` seconds stops the bench (and its server). Not resumable, by
design: the figure is one server process's RSS over its life, which a second process cannot continue; what an
interrupted bench measured is in ``OUT/memory_partial.json``, rewritten after every run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import REPO, machine, write_json

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--agents", type=int, default=5000)
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    p.add_argument("--run-bound", type=float, default=900.0, help="seconds one run may take before the bench stops")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "warren_sim.cli", "serve", "--port", "0", "--data-dir",
                                 str(Path(tmp) / "data"), "--max-agents", str(max(args.agents, 1))],
                                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[-1]
            curve = [{"runs": 0, "rss_mib": round(rss_mib(proc.pid), 1)}]
            print(f"server {url}, pid {proc.pid}: RSS {curve[0]['rss_mib']} MiB before any run", flush=True)
            with httpx.Client(base_url=url, headers=PROTO, timeout=600) as h:
                for i in range(1, args.runs + 1):
                    t0 = time.perf_counter()
                    r = h.post("/v1/runs", params={"scenario": "warren", "seed": i},
                               json={"params": {"agents": args.agents}})
                    r.raise_for_status()
                    run = r.json()["run_id"]
                    deadline = t0 + args.run_bound
                    while (view := h.get(f"/v1/runs/{run}").json())["status"] in ("created", "running"):
                        if time.perf_counter() > deadline:  # bounded: a stuck run ends the bench, not the machine
                            raise SystemExit(f"run {i} still {view['status']} after {args.run_bound} s")
                        time.sleep(0.25)
                    point = {"runs": i, "rss_mib": round(rss_mib(proc.pid), 1), "status": view["status"],
                             "seconds": round(time.perf_counter() - t0, 2)}
                    curve.append(point)
                    write_json(args.out, "memory_partial", {"options": vars(args) | {"out": str(args.out)},
                                                            "curve": curve})
                    print(f"run {i:3d} {view['status']:9s} {point['seconds']:6.1f} s   RSS {point['rss_mib']:7.1f} MiB",
                          flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    first = curve[1]["rss_mib"] if len(curve) > 1 else curve[0]["rss_mib"]
    peak = max(c["rss_mib"] for c in curve)
    result = {"machine": machine(), "options": {"runs": args.runs, "agents": args.agents}, "curve": curve,
              "rss_after_first_mib": first, "rss_end_mib": curve[-1]["rss_mib"], "rss_peak_mib": peak,
              "end_over_first": round(curve[-1]["rss_mib"] / first, 3),
              "target": {"rss_end_below_mib": 300, "met": curve[-1]["rss_mib"] < 300}}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out, "memory", result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("curve", "machine")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
