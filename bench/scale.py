"""scale: one server holding N long-polls at once, and a 100,000-agent headless run.

1. Served: a ``warren`` run with N agents, every one controlled (npc_policy none), served by
   ``bench/served.py`` (``warren serve``'s start path). The load process claims N-1 agents with bulk
   claims (``POST /v1/runs/{run}/claim``, 2,000 ids per request; ``--claim single`` in loadgen for one
   request per agent), holds a long-poll for each (N-1 connections), waits until the server is idle,
   reads its RSS, then claims the last agent: the run starts and one batch publishes N envelopes at once.
   Claim time, measured after the batch: a second N-agent run claimed with one ``{"agents": "all"}``
   request (the bulk claims of the N-1 above are reported too). Wake latency = envelope published (its
   ``deadline_unix`` minus the run's decision deadline, the server's clock mapped to unix time) -> the load process
   has the whole response carrying it (stamped on receipt of the response's last byte, before any parsing), on one
   unix clock; the same definition for every pass. The one-GET-per-agent pass holds its N long-polls with the lean
   client of ``bench/pollclient.py`` (raw sockets, one epoll loop: ~10-20 us of client CPU per reply) so the
   figure is the server's delivery, not the client's reading (``--poll-client httpx`` in loadgen for the httpx
   client, one per 4 agents, as before round 5; it trailed the server's writes by seconds at 10,000:
   bench/results/r5-perf-poll.md); the multi-agent passes read 20 replies and keep httpx. Every agent then
   answers with a noop (httpx). Server memory: ``VmRSS`` while the polls are held and
   after the batch, ``VmHWM`` (peak). Target < 1 GiB. A second pass holds the same N agents with
   multi-agent polls (``POST /v1/runs/{run}/observations``, 500 agents a request: 20 requests) and measures
   the same wake latency: what a client driving many agents over HTTP gets with the extension; a third
   pass asks for ``parts: ["observation"]`` (no ``text``, no ``affordances``: what an RL-style client needs).
   The multi-poll passes measure the wake only (no answers).
2. Headless: ``warren run warren --param agents=M --quiet`` in a subprocess; its peak RSS is the
   ``ru_maxrss`` of that child (``os.wait4``: the rusage of RUSAGE_CHILDREN, for that child alone) and its
   decisions/s the one it prints. Target < 2 GiB.

Bounded everywhere (a busy machine once ran it past its caller's timeout): the load process gives up on
the batch, and says so (``not_measured``), when the polls are not all on the wire within half of its
bound, and the headless child is killed past ``HEADLESS_BOUND_S``.

Full: N = 10,000, M = 100,000. Quick: N = 1,000, M = 10,000.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    Options,
    ServerProcess,
    bench_env,
    fmt_num,
    loadgen,
    print_table,
    proc_status_kib,
    target,
    targets_table,
)
from warren_sim.runtime.clock import wall_seconds

GIB_KIB = 2**20
SERVED_TARGET_KIB = 1 * GIB_KIB
HEADLESS_TARGET_KIB = 2 * GIB_KIB
PROFILE_AGENTS = 2000
POLL_GROUP = 500  # agents per multi-agent poll (bench/loadgen.py's POLL_GROUP)
# The run's decision deadline: long enough that answering 10,000 agents is measured, not cut by expiry (at
# 60 s, the default, about a quarter of the answers arrived after it in the first full run and were expired).
DEADLINE_S = 600.0
LOAD_BOUND_S = 400  # the load process's own bound (it says "not_measured" rather than overrun it)
HEADLESS_BOUND_S = 900.0  # the 100,000-agent headless run takes ~1-2 min quiet; killed (and said) past this


def _lat(lat: dict[str, Any]) -> str:
    """first / p50 / p99 / max of a wake latency, ms. The first receipt is the server's floor (publishing, then
    building the first reply); the spread after it is the replies' delivery and this one load process's reading."""
    return " / ".join(fmt_num(lat.get(k, float("nan"))) for k in ("min", "p50", "p99", "max")) + " ms"


def served(n: int, profile_to: Path | None = None, poll: str = "single", parts: str = "",
           poll_client: str = "lean", answers: bool = True) -> dict[str, Any]:
    spec = json.dumps({"scenario": "warren", "agents": n, "decision_deadline_s": DEADLINE_S})
    prefix = [sys.executable]
    if profile_to is not None:
        prefix += ["-m", "pyinstrument", "-r", "text", "-o", str(profile_to)]
    with ServerProcess([*prefix, "-m", "bench.served", "--data-dir", "{dir}/data", "--run", spec],
                       name="warren-served", stop_timeout=60) as server:
        line = server.readline()
        if not line.startswith("RUN "):
            raise RuntimeError(f"bench.served did not create the run: {line!r} {server.stderr_tail()}")
        run_id = line.split()[1]
        rss_idle = proc_status_kib(server.pid, "VmRSS")
        r = loadgen("scale", "--url", server.url, "--agents", str(n), "--run", run_id, "--server-pid",
                    str(server.pid), "--timeout", str(LOAD_BOUND_S), "--poll", poll, "--parts", parts, "--poll-client", poll_client,
                    *([] if answers else ["--no-answers"]),
                    "--deadline-s", str(DEADLINE_S), timeout=LOAD_BOUND_S + 200)
    r["server_rss"]["created_run_kib"] = rss_idle  # peak_kib: read by the load process before its claim-all run
    return r


def headless(m: int) -> dict[str, Any]:
    """``warren run`` in a child reaped with ``os.wait4``, which gives that child's own ``ru_maxrss`` (KiB)."""
    argv = [sys.executable, "-m", "warren_sim.cli", "run", "warren", "--param", f"agents={m}", "--quiet"]
    t0 = wall_seconds()
    with open(os.devnull, "w") as devnull:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=devnull, text=True, cwd=REPO,
                                env=bench_env())
        assert proc.stdout is not None
        while True:  # bounded: wait4 without blocking, the child killed past the bound
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if wall_seconds() - t0 > HEADLESS_BOUND_S:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        out = proc.stdout.read()  # the summary is a few lines: it fits the pipe's buffer
        proc.returncode = os.waitstatus_to_exitcode(status)  # tell Popen the child is reaped
        proc.stdout.close()
    wall = wall_seconds() - t0
    found = re.search(r"([\d,]+) decisions, wall ([\d.]+)s, ([\d,]+) decisions/s", out)
    return {"agents": m, "exit": proc.returncode, "wall_s": wall, "maxrss_kib": usage.ru_maxrss,
            "decisions": int(found.group(1).replace(",", "")) if found else None,
            "run_wall_s": float(found.group(2)) if found else None,
            "decisions_per_s": float(found.group(3).replace(",", "")) if found else None,
            "summary": out.strip().splitlines()[:2]}


def run(opts: Options) -> dict[str, Any]:
    n = 1000 if opts.quick else 10_000
    m = 10_000 if opts.quick else 100_000
    s = served(n)
    many = served(n, poll="many")
    narrow = None if opts.quick else served(n, poll="many", parts="observation")  # --quick: a smoke test
    h = headless(m)
    if h["exit"] != 0:
        print(f"headless run not measured: warren run warren --param agents={m} exited {h['exit']} after "
              f"{h['wall_s']:.0f} s (bound {HEADLESS_BOUND_S:.0f} s): {h['summary']}")
    rss = s["server_rss"]
    lat = s["wake_latency_ms"]
    lat_many = many["wake_latency_ms"]
    lat_narrow = narrow["wake_latency_ms"] if narrow else {"p50": float("nan"), "p99": float("nan"),
                                                           "max": float("nan"), "n": 0}
    print_table(f"scale: {n:,} long-polls held by one server", ["measure", "value"], [
        ["agents claimed, long-polling", f"{s['agents']:,}"],
        [f"claiming {n:,} agents, one {{\"agents\": \"all\"}} request", f"{s['claim_s']:.2f} s"],
        [f"claiming the {n - 1:,} above ({s.get('claim_how')}, 2,000 ids a request)",
         f"{s.get('claim_first_n_minus_1_s', float('nan')):.2f} s"],
        ["server RSS, run created", f"{rss['created_run_kib'] / 1024:,.0f} MiB"],
        ["server RSS, polls held", f"{rss.get('holding_kib', 0) / 1024:,.0f} MiB"],
        ["server RSS, after the batch", f"{rss.get('after_kib', 0) / 1024:,.0f} MiB"],
        ["server peak RSS (VmHWM)", f"{rss['peak_kib'] / 1024:,.0f} MiB"],
        ["wake latency first / p50 / p99 / max", f"{_lat(lat)} (n={lat['n']:,})"],
        ["then answering all (noops)", f"{fmt_num(s['answer_phase_s'], 1)} s: "
                                       + ", ".join(f"{k} {v:,}" for k, v in s["answer_verdicts"].items())
                                       + (" (cut by the time bound)" if s["timed_out"] else "")],
        ["poll outcomes", ", ".join(f"{k}: {v:,}" for k, v in s["statuses"].items())],
        [f"multi-agent polls ({POLL_GROUP} agents a request): wake first / p50 / p99 / max",
         f"{_lat(lat_many)} (n={lat_many['n']:,})"
         + (f" NOT MEASURED: {many['not_measured']}" if many.get("not_measured") else "")],
        ["multi-agent polls: server peak RSS", f"{many['server_rss']['peak_kib'] / 1024:,.0f} MiB"],
        ["multi-agent polls, parts [\"observation\"] (no text, affordances): wake first / p50 / p99 / max",
         f"{_lat(lat_narrow)} (n={lat_narrow['n']:,})"],
        ["transport retries (closed keep-alives)", ", ".join(f"{k}: {v:,}" for k, v in
                                                            s["transport_retries"].items()) or "none"],
    ], note="one measurement (no repeats): each takes tens of seconds to minutes"
            + (f"; NOT MEASURED: {s['not_measured']}" if s.get("not_measured") else ""))
    print_table(f"scale: {m:,}-agent headless run", ["measure", "value"], [
        ["decisions", f"{h['decisions']:,}" if h["decisions"] else "-"],
        ["decisions/s (its own figure)", fmt_num(h["decisions_per_s"] or float("nan"))],
        ["exit status", str(h["exit"])],
        ["wall, whole process", f"{h['wall_s']:.1f} s"],
        ["max RSS (ru_maxrss)", f"{h['maxrss_kib'] / 1024:,.0f} MiB"],
    ])
    targets = [target(f"server peak RSS, {n:,} long-polls", rss["peak_kib"] / 1024, "<", SERVED_TARGET_KIB / 1024,
                      " MiB"),
               target(f"headless max RSS, {m:,} agents", h["maxrss_kib"] / 1024 if h["exit"] == 0 else float("inf"),
                      "<", HEADLESS_TARGET_KIB / 1024, " MiB"),
               # issue 14, target 4: the batch reaches every long-poll fast, and claiming is linear and cheap
               target(f"wake latency p99, {n:,}-envelope batch to {n:,} long-polls", lat["p99"]
                      if lat["n"] == n else float("inf"), "<", 1000.0, " ms"),
               target(f"wake latency p99, {n:,} envelopes to multi-agent polls ({POLL_GROUP} agents each)",
                      lat_many["p99"] if lat_many["n"] == n else float("inf"), "<", 1000.0, " ms"),
               target(f"claiming {n:,} agents (one bulk claim)", s["claim_s"], "<", 3.0, " s")]
    if narrow is not None:
        targets.insert(3, target("wake latency p99, the same with parts [observation] (no text, affordances)",
                                 lat_narrow["p99"] if lat_narrow["n"] == n else float("inf"), "<", 1000.0, " ms"))
    targets_table(targets)
    out: dict[str, Any] = {"served": s, "served_multi_poll": many, "served_multi_poll_observation": narrow,
                           "headless": h, "targets": targets}
    if opts.profile:  # where the served time goes: claims, publishing, answering (a separate, smaller pass:
        opts.out.mkdir(parents=True, exist_ok=True)  # profiling slows the server down several times)
        path = opts.out / "scale_profile_server.txt"
        out["profile_agents"] = min(n, PROFILE_AGENTS)
        served(min(n, PROFILE_AGENTS), profile_to=path)
        out["profile"] = str(path)
        print(f"profile: {path}")
    return out
