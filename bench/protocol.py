"""protocol: K remote agents over real loopback HTTP, next to the stack's ceiling, in the same run.

One ``warren serve --port 0`` and one ``bench/trivial_app.py`` subprocess live for the whole benchmark;
for each repeat and each K (1, 16, 64), the load process (``bench/loadgen.py``) drives

- ``http-agents``: runs of the ``warren`` scenario with ``agents=K``, every agent controlled and answered at
  once by the solution policy (npc_policy none), run after run for the duration; decisions/s counts the
  accepted commands over the time the runs were being played (creating runs, claiming and fetching
  briefings are setup, reported apart), and latency is envelope published -> accepted receipt;
- ``trivial``: K loops of GET + POST on the trivial endpoint, for the same duration.

Efficiency = 2 x decisions/s / ceiling requests/s (a remote decision over HTTP is two requests: the poll
that returns the envelope and the command). Target: >= 0.8 at K = 64.
"""

from __future__ import annotations

import sys
from typing import Any

from bench.common import (
    Options,
    ServerProcess,
    fmt_stat,
    loadgen,
    print_table,
    summary,
    target,
    targets_table,
    trim_profile,
    warren_serve,
)

KS = (1, 16, 64)
TARGET_K = 64
TARGET_EFFICIENCY = 0.8


def trivial_server() -> ServerProcess:
    return ServerProcess([sys.executable, "-m", "bench.trivial_app", "--port", "0"], name="trivial")


def http_agents(url: str, pid: int, k: int, duration: float) -> dict[str, Any]:
    return loadgen("http-agents", "--url", url, "--agents", str(k), "--duration", f"{duration:g}",
                   "--server-pid", str(pid), timeout=duration + 120)


def ceiling(url: str, pid: int, k: int, duration: float) -> dict[str, Any]:
    return loadgen("trivial", "--url", url, "--agents", str(k), "--duration", f"{duration:g}",
                   "--server-pid", str(pid), timeout=duration + 60)


def run(opts: Options) -> dict[str, Any]:
    duration = opts.secs(10.0, 2.0)
    reps = opts.reps(3)
    raw: dict[int, list[dict[str, Any]]] = {k: [] for k in KS}
    with warren_serve() as warren, trivial_server() as trivial:
        for _ in range(reps):
            for k in KS:  # side by side: the protocol, then the ceiling, under the same noise
                a = http_agents(warren.url, warren.pid, k, duration)
                c = ceiling(trivial.url, trivial.pid, k, duration)
                raw[k].append({"agents": a, "ceiling": c,
                               "efficiency": 2 * a["decisions_per_s"] / c["requests_per_s"]})
    results, rows = [], []
    for k in KS:
        rs = raw[k]
        res = {
            "agents": k, "duration_s": duration, "repeats": reps,
            "decisions_per_s": summary(r["agents"]["decisions_per_s"] for r in rs),
            "latency_p50_ms": summary(r["agents"]["latency_ms"]["p50"] for r in rs),
            "latency_p99_ms": summary(r["agents"]["latency_ms"]["p99"] for r in rs),
            "server_cpu_us_per_decision": summary(r["agents"]["server_cpu_us_per_decision"] or 0 for r in rs),
            "ceiling_requests_per_s": summary(r["ceiling"]["requests_per_s"] for r in rs),
            "ceiling_server_cpu_us_per_request": summary(r["ceiling"]["server_cpu_us_per_request"] or 0 for r in rs),
            "efficiency": summary(r["efficiency"] for r in rs),
            "runs": [r["agents"] for r in rs], "ceilings": [r["ceiling"] for r in rs],
        }
        results.append(res)
        rows.append([str(k), fmt_stat(res["decisions_per_s"]), fmt_stat(res["latency_p50_ms"], 1),
                     fmt_stat(res["latency_p99_ms"], 1), fmt_stat(res["server_cpu_us_per_decision"]),
                     fmt_stat(res["ceiling_requests_per_s"]), fmt_stat(res["efficiency"], 2)])
    print_table(f"protocol: warren over loopback HTTP vs trivial JSON endpoint ({reps} x {duration:g} s; "
                "median (min-max))",
                ["K", "decisions/s", "p50 ms", "p99 ms", "server us/decision", "ceiling req/s", "efficiency"], rows)
    at = next(r for r in results if r["agents"] == TARGET_K)
    targets = [target(f"HTTP efficiency at K={TARGET_K}", at["efficiency"]["median"], ">=", TARGET_EFFICIENCY)]
    targets_table(targets)
    out: dict[str, Any] = {"results": results, "targets": targets}
    if opts.profile:
        out["profile"] = profile_server(opts, TARGET_K, duration)
    return out


def profile_server(opts: Options, k: int, duration: float) -> str:
    """The server under pyinstrument while K HTTP agents play (a separate pass: profiling slows it)."""
    opts.out.mkdir(parents=True, exist_ok=True)
    path = opts.out / "protocol_profile_server.txt"
    with warren_serve(profile_to=path) as warren:
        http_agents(warren.url, warren.pid, k, duration)
    trim_profile(path)
    print(f"profile: {path}")
    return str(path)
