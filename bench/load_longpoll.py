"""``python -m bench.load_longpoll [--agents 500] [--duration 60]``: many long-polling agents on a real server.

Starts ``warren serve`` (the real CLI, loopback, port 0), creates one paced run of the ``warren`` scenario whose
every forager is controlled remotely, claims them all, and runs one agent loop per forager for ``--duration``
seconds: long-poll (``wait=25``), answer with a ``sleep_ms``, repeat. With ``pace: 1`` the simulation may not run
ahead of real time. Two ways to sleep (``--sleep``):

- ``ticks`` (default): 1, 2 or 3 s, so agents wake together on whole seconds, about a third to a half of them
  in each batch: hundreds of long-polls answered at once, every second (a ticked world);
- ``ms``: 500-3,000 ms at random, so nearly every batch holds one agent. A claimed agent's wake blocks its
  batch until it answers, so batches run one after another at the speed of one HTTP round trip each and the
  simulation falls behind real time (``sim_time_s_at_end`` tells by how much).

Reported: errors (any transport failure, unexpected status or non-accepted receipt: the target is 0), decisions,
requests, and the **wake latency**: from the envelope's publication (``deadline_unix - decision_deadline_s``,
on the server's clock) to its arrival at the agent (on ours; both are unix time on one machine). Side by side,
in the same run, the latency of a trivial ``GET /v1`` probed every 100 ms: the floor a wake cannot beat.
The default ``pytest`` run does a short version (tests/test_load_e2e.py); this is the full one.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.common import PROTO, machine, percentile, proc_cpu_seconds, unix_now, warren_serve
from warren_sim.runtime.clock import wall_seconds
from warren_sim.scenarios import load_scenario

DEADLINE_S = 60.0
WAIT_S = 25.0
SLEEP_MS = (500, 3000)  # --sleep ms
SLEEP_TICKS = (1000, 2000, 3000)  # --sleep ticks


def _cpu(pid: int | None) -> float:
    return proc_cpu_seconds(pid) if pid else 0.0


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return None


def _client(url: str) -> httpx.AsyncClient:
    # one small client per agent: httpcore's pool costs O(pool size^2) per request (see bench/loadgen.py)
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    return httpx.AsyncClient(base_url=url, headers=PROTO, limits=limits, timeout=httpx.Timeout(WAIT_S + 30))


class Tally:
    def __init__(self) -> None:
        self.wakes: list[float] = []
        self.steady: list[float] = []  # wakes after the first (every agent wakes at t=0 in one batch)
        self.probes: list[float] = []
        self.errors: list[str] = []
        self.requests = 0
        self.decisions = 0
        self.agents_woken: set[str] = set()

    def error(self, what: str) -> None:
        if len(self.errors) < 50:
            self.errors.append(what)
        else:
            self.errors.append("")


async def run_load(url: str, agents: int, duration: float, seed: int = 0, sleep: str = "ticks",
                   server_pid: int | None = None) -> dict[str, Any]:
    """Drive ``agents`` long-polling agents against the server at ``url`` for ``duration`` s; the figures.

    With ``server_pid``, the server's CPU seconds during the load window are reported next to the client's.
    """
    tally = Tally()
    rng = random.Random(seed)
    async with _client(url) as admin:
        ids = [a.id for a in load_scenario("warren", {"agents": agents}).spec.agents]
        r = await admin.post("/v1/runs", params={"scenario": "warren", "seed": seed},
                             json={"controlled_agents": ids, "npc_policy": "none", "pace": 1,
                                   "decision_deadline_s": DEADLINE_S, "params": {"agents": agents}})
        if r.status_code != 201:
            raise RuntimeError(f"cannot create the run: {r.status_code} {r.text[:500]}")
        run = r.json()
        run_id = run["run_id"]
        assert sorted(a["agent_id"] for a in run["agents"]) == sorted(ids), "unexpected agent ids"
        clients = {aid: _client(url) for aid in ids}
        leases: dict[str, str] = {}
        limiter = trio.CapacityLimiter(32)

        async def claim(aid: str) -> None:
            async with limiter:
                resp = await clients[aid].post(f"/v1/runs/{run_id}/agents/{aid}/claim")
            if resp.status_code != 200:
                raise RuntimeError(f"claim {aid}: {resp.status_code} {resp.text[:300]}")
            leases[aid] = resp.json()["lease"]

        t_claim = wall_seconds()
        async with trio.open_nursery() as nursery:
            for aid in ids:
                nursery.start_soon(claim, aid)
        claim_s = wall_seconds() - t_claim
        seeds = {aid: rng.randrange(2**32) for aid in ids}

        async def agent(aid: str) -> None:
            c, lease, after, n = clients[aid], leases[aid], -1, 0
            mine = random.Random(seeds[aid])
            path = f"/v1/runs/{run_id}/agents/{aid}"
            while True:
                try:
                    resp = await c.get(f"{path}/observations", params={"after": after, "wait": WAIT_S, "lease": lease})
                    tally.requests += 1
                    if resp.status_code == 204:
                        continue
                    if resp.status_code != 200:
                        tally.error(f"{aid} poll: {resp.status_code} {resp.text[:200]}")
                        return
                    arrived = unix_now()
                    env = resp.json()
                    latency = arrived - (env["deadline_unix"] - DEADLINE_S)
                    tally.wakes.append(latency)
                    if env["reason"] != "start":
                        tally.steady.append(latency)
                    tally.agents_woken.add(aid)
                    after = env["seq"]
                    n += 1
                    body = {"command_id": f"{aid}-{n}", "observation_id": env["observation_id"],
                            "sleep_ms": mine.choice(SLEEP_TICKS) if sleep == "ticks" else mine.randint(*SLEEP_MS)}
                    resp = await c.post(f"{path}/commands", params={"lease": lease}, json=body)
                    tally.requests += 1
                    if resp.status_code != 200 or resp.json()["status"] != "accepted":
                        tally.error(f"{aid} submit: {resp.status_code} {resp.text[:200]}")
                        return
                    tally.decisions += 1
                except httpx.HTTPError as exc:
                    tally.error(f"{aid}: {type(exc).__name__}: {exc}")
                    return

        async def probe() -> None:
            while True:
                t0 = wall_seconds()
                try:
                    resp = await admin.get("/v1")
                    tally.requests += 1
                    if resp.status_code != 200:
                        tally.error(f"probe: {resp.status_code}")
                    tally.probes.append(wall_seconds() - t0)
                except httpx.HTTPError as exc:
                    tally.error(f"probe: {type(exc).__name__}: {exc}")
                await trio.sleep(0.1)

        t0 = wall_seconds()
        cpu0 = _cpu(server_pid), _own_cpu()
        with trio.move_on_after(duration):
            async with trio.open_nursery() as nursery:
                for aid in ids:
                    nursery.start_soon(agent, aid)
                nursery.start_soon(probe)
        elapsed = wall_seconds() - t0
        server_cpu, client_cpu = _cpu(server_pid) - cpu0[0], _own_cpu() - cpu0[1]
        # The window cancelled requests mid-send: httpx's request-body async generators are left suspended in
        # reference cycles (the Cancelled tracebacks). Collected now, trio closes them in this run; collected
        # after trio.run returned, each is an "Exception ignored" that pytest reports in whatever test is running.
        gc.collect()
        await trio.sleep(0)
        view = (await admin.get(f"/v1/runs/{run_id}")).json()
        await admin.delete(f"/v1/runs/{run_id}")
        for c in clients.values():
            await c.aclose()
    ms = 1000.0
    wakes, probes, steady = tally.wakes, tally.probes, tally.steady
    return {
        "agents": agents, "sleep": sleep, "duration_s": round(elapsed, 2), "claim_s": round(claim_s, 2),
        "errors": len(tally.errors), "error_samples": [e for e in tally.errors if e][:10],
        "decisions": tally.decisions, "decisions_per_s": round(tally.decisions / elapsed, 1),
        "requests": tally.requests, "requests_per_s": round(tally.requests / elapsed, 1),
        "server_cpu_share": round(server_cpu / elapsed, 2) if server_pid else None,
        "client_cpu_share": round(client_cpu / elapsed, 2), "loadavg_1m": _loadavg(),
        "agents_woken": len(tally.agents_woken), "run_status_at_end": view["status"],
        "sim_time_s_at_end": view["sim_time_ms"] / 1000,
        "wake_ms": {"p50": round(percentile(wakes, 50) * ms, 2), "p90": round(percentile(wakes, 90) * ms, 2),
                    "p99": round(percentile(wakes, 99) * ms, 2), "max": round(max(wakes, default=float("nan")) * ms, 2),
                    "n": len(wakes)},
        "wake_ms_after_start": {"p50": round(percentile(steady, 50) * ms, 2),
                                 "p99": round(percentile(steady, 99) * ms, 2), "n": len(steady)},
        "probe_get_ms": {"p50": round(percentile(probes, 50) * ms, 2), "p99": round(percentile(probes, 99) * ms, 2),
                         "n": len(probes)},
        "ratio_wake_p99_to_probe_p99": round(percentile(wakes, 99) / percentile(probes, 99), 2)
        if probes and wakes else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load_longpoll", description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=500)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    p.add_argument("--sleep", choices=("ticks", "ms"), default="ticks",
                   help="ticks: sleep 1-3 whole seconds (agents wake in big batches); ms: 500-3000 ms at random")
    p.add_argument("--url", help="an already running server (default: start `warren serve` on loopback)")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    args = p.parse_args(argv)
    info = machine()
    if args.url:
        result = trio.run(run_load, args.url, args.agents, args.duration, 0, args.sleep)
    else:
        with warren_serve() as server:
            result = trio.run(run_load, server.url, args.agents, args.duration, 0, args.sleep, server.pid)
            result["server_stderr_tail"] = server.stderr_tail(500)
    result["machine"] = {k: info[k] for k in ("cores", "cpu", "mem_gib", "python")}
    if not args.json:
        w, pr = result["wake_ms"], result["probe_get_ms"]
        print(f"{result['agents']} long-polling agents ({result['sleep']}) for {result['duration_s']} s, sim time "
              f"{result['sim_time_s_at_end']} s: {result['errors']} errors, "
              f"{result['decisions']} decisions ({result['decisions_per_s']}/s), {result['requests']} requests "
              f"({result['requests_per_s']}/s)")
        print(f"CPU share during the load: server {result['server_cpu_share']}, client {result['client_cpu_share']} "
              f"(of one core; 1-minute load average {result['loadavg_1m']} on {result['machine']['cores']} cores)")
        print(f"wake latency ms: p50 {w['p50']}, p90 {w['p90']}, p99 {w['p99']}, max {w['max']} (n={w['n']})")
        ws = result["wake_ms_after_start"]
        print(f"  without the start batch (all {result['agents']} wake at t=0): p50 {ws['p50']}, p99 {ws['p99']} "
              f"(n={ws['n']})")
        print(f"GET /v1 probe ms (same run): p50 {pr['p50']}, p99 {pr['p99']}; wake p99 / probe p99 = "
              f"{result['ratio_wake_p99_to_probe_p99']}")
    print(json.dumps(result))
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
