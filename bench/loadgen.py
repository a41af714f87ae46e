"""The load process: ``python -m bench.loadgen MODE ...`` drives a server and prints one JSON line of results.

It runs in its own process (its own core, as far as a 2-core machine allows), so the server's CPU is the
server's alone. Modes:

- ``http-agents``  K remote agents over HTTP long-polling (trio + ``httpx.AsyncClient``), each answering
  every observation at once with the ``warren`` scenario's solution policy, run after run, for a duration;
- ``ws-agents``    the same agents over the WebSocket binding: ``--connections one`` (batched
  ``observations`` + ``agent.submit_many`` on one connection) or ``many`` (one connection per agent);
- ``ws-runs``      K one-agent runs (``--seeds``: warren_trips) played at once on ONE WebSocket: the
  analogue of K OpenEnv sessions, multiplexed on one connection;
- ``trivial``      K loops of GET + POST against ``bench/trivial_app.py`` (the stack's ceiling);
- ``scale``        N agents of one run claimed and long-polling at once; wake latency of the first batch.

Latency of a decision: from the envelope's publication (``deadline_unix - decision_deadline_s``; the server
rounds ``deadline_unix`` to the millisecond) to the arrival of its ``accepted`` receipt, on one unix clock.
Every loop is bounded by a wall-clock window and by a count; traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import ssl
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import trio

from bench import wsclient
from bench.common import PROTO, percentile, proc_cpu_seconds, proc_status_kib, unix_now
from bench.pollclient import PollSwarm
from warren_sim.runtime.clock import wall_seconds

DEADLINE_S = 60.0  # decision deadline of the runs: never reached, it only anchors the publish time (scale: --deadline-s)
POLL_WAIT_S = 30.0
MAX_RUNS = 10_000  # per invocation, whatever the duration
MAX_DECISIONS_PER_AGENT = 100_000
BULK_CHUNK = 2_000  # ids per bulk claim in scale (2,000 x ~17 bytes fits the 64 KiB body)
POLL_GROUP = 500  # agents per multi-agent poll in scale --poll many (500 x ~60 bytes of id and lease)


def _check_loopback(url: str) -> None:
    host = urlsplit(url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"loadgen: refusing to send traffic to {host!r}; only 127.0.0.1 is a target")


class EnvelopeObservation:
    """A policy's view of an envelope (the duck type of ``warren_sim.engine.policy.ObservationLike``)."""

    __slots__ = ("affordances", "agent_id", "observation", "observation_id", "reason", "seq", "text", "time")

    def __init__(self, env: dict[str, Any]) -> None:
        self.agent_id = env["agent_id"]
        self.observation_id = env["observation_id"]
        self.seq = env["seq"]
        self.time = env["sim_time_ms"]
        self.reason = env["reason"]
        self.observation = env["observation"]
        self.affordances = env.get("affordances", [])
        self.text = env.get("text", "")


def command_body(env: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    oid = env["observation_id"]
    return {"command_id": f"c-{oid}", "observation_id": oid, **decision}


_SOLUTION: dict[str, Any] = {}
_IDS: dict[tuple[str, int], list[str]] = {}
TRIPS_SCENARIO = "warren_trips"  # bench/scenarios/warren_trips: warren with `seeds` trips per forager


def scenario_of(seeds: int = 0, name: str = "warren", steps: int = 0) -> tuple[str, dict[str, Any]]:
    """The scenario a mode plays and its parameters besides ``agents``: ``warren``; with ``--seeds N`` the
    bench's ``warren_trips`` (a longer episode per agent); with ``--scenario echo`` the bench's ``echo`` (every
    agent in every batch, a trivial answer each, ``--steps`` ticks a run). The bench's scenarios need the server
    to run with ``--scenarios bench/scenarios``."""
    if not seeds and name == "warren":
        return "warren", {}
    here = str(Path(__file__).resolve().parent / "scenarios")
    if here not in os.environ.get("WARREN_SCENARIOS", "").split(os.pathsep):  # for load_scenario in this process
        os.environ["WARREN_SCENARIOS"] = os.pathsep.join(p for p in (here, os.environ.get("WARREN_SCENARIOS")) if p)
    if name == "echo":
        return "echo", {"steps": steps} if steps else {}
    return TRIPS_SCENARIO, {"seeds": seeds}


def solution(scenario: str = "warren") -> Any:
    """The scenario's solution module (its ``make_policy(agent_id, role, briefing)``)."""
    if scenario not in _SOLUTION:
        from warren_sim.scenarios import load_scenario

        _SOLUTION[scenario] = load_scenario(scenario, {"agents": 1}).solution
    return _SOLUTION[scenario]


def agent_ids(k: int, scenario: str = "warren") -> list[str]:
    if (scenario, k) not in _IDS:
        from warren_sim.scenarios import load_scenario

        _IDS[scenario, k] = [a.id for a in load_scenario(scenario, {"agents": k}).spec.agents]
    return _IDS[scenario, k]


def run_body(ids: list[str], k: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"controlled_agents": ids, "npc_policy": "none", "pace": None, "decision_deadline_s": DEADLINE_S,
            "params": {"agents": k, **(extra or {})}}


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) this load process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Tally:
    """What a mode counts: accepted decisions, their latencies, the time spent driving and in setup."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.decisions = 0
        self.refused: dict[str, int] = {}
        self.latencies: list[float] = []
        self.driving = 0.0
        self.setup = 0.0
        self.server_cpu = 0.0
        self.runs = 0
        self.runs_cut = 0
        self.frames_out = 0
        self.frames_in = 0  # WebSocket frames received (one per batch, ideally: the reply and the next envelopes)
        self.requests = 0  # HTTP requests of the agents while driving (polls + commands)
        self.client_cpu = 0.0
        self._t0 = 0.0
        self._cpu0 = 0.0
        self._own0 = 0.0
        self._active = False

    def accepted(self, receipt: dict[str, Any] | None, env: dict[str, Any], t: float) -> None:
        status = receipt["status"] if receipt else "error"
        if status in ("accepted", "duplicate"):  # duplicate: a retried command that was accepted the first time
            self.decisions += 1
            self.latencies.append(t - (env["deadline_unix"] - DEADLINE_S))
        else:
            self.refused[status] = self.refused.get(status, 0) + 1

    def drive_start(self) -> None:
        self._active = True
        self._t0 = wall_seconds()
        self._own0 = own_cpu_seconds()
        self._cpu0 = proc_cpu_seconds(self.server_pid) if self.server_pid else 0.0

    def drive_end(self) -> None:
        if not self._active:
            return
        self._active = False
        self.driving += wall_seconds() - self._t0
        self.client_cpu += own_cpu_seconds() - self._own0
        if self.server_pid:
            self.server_cpu += proc_cpu_seconds(self.server_pid) - self._cpu0

    def result(self, **extra: Any) -> dict[str, Any]:
        lat_ms = [x * 1000 for x in self.latencies]
        rate = self.decisions / self.driving if self.driving > 0 else 0.0
        return {"decisions": self.decisions, "driving_s": self.driving, "setup_s": self.setup,
                "decisions_per_s": rate, "runs": self.runs, "runs_cut": self.runs_cut, "refused": self.refused,
                "latency_ms": {"p50": percentile(lat_ms, 50), "p99": percentile(lat_ms, 99),
                               "max": max(lat_ms) if lat_ms else float("nan"), "n": len(lat_ms)},
                "server_cpu_s": self.server_cpu,
                "server_cpu_us_per_decision": 1e6 * self.server_cpu / self.decisions if self.decisions else None,
                "client_cpu_s": self.client_cpu,
                "client_cpu_us_per_decision": 1e6 * self.client_cpu / self.decisions if self.decisions else None,
                "frames_out": self.frames_out, "frames_in": self.frames_in, "requests": self.requests,
                "requests_per_decision": self.requests / self.decisions if self.decisions else None, **extra}


def http_client(url: str, connections: int, tls: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """A client with a small pool. Why small: httpcore 1.0.9's ``_assign_requests_to_connections`` runs twice
    per request and is O(pool size squared) (for each idle connection it rebuilds a list over all of them),
    so one pool of 64 connections spends ~8 ms of CPU per request and caps a client near 125 requests/s.
    So each agent (each ceiling loop) gets its own client, as independent agents would have anyway."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    # Plain http to loopback: TLS is never used; one shared context spares each client loading the CA store.
    return httpx.AsyncClient(base_url=url, headers=PROTO, limits=limits, timeout=httpx.Timeout(90.0),
                             verify=tls or _TLS)


_TLS = ssl.create_default_context()
_RETRIED: dict[str, int] = {}  # transport errors retried, by type (reported in the results)
_T0 = wall_seconds()


def log(message: str) -> None:
    sys.stderr.write(f"[loadgen {wall_seconds() - _T0:7.2f}s] {message}\n")
    sys.stderr.flush()
RETRIES = 6


async def send(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, retried on a connection the server closed as it was reused (keep-alive race).

    Safe to retry: commands are deduplicated by ``command_id`` (a retry of an accepted one is ``duplicate``)
    and a request refused on a dead connection never reached the server.
    """
    for attempt in range(RETRIES):
        try:
            return await client.request(method, url, **kwargs)
        except (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError, httpx.WriteError) as exc:
            if attempt == RETRIES - 1:
                raise
            _RETRIED[type(exc).__name__] = _RETRIED.get(type(exc).__name__, 0) + 1
            await trio.sleep(0.01 * attempt)
    raise AssertionError("unreachable")


# -- HTTP agents ---------------------------------------------------------------------------------------
async def http_agents(args: argparse.Namespace) -> dict[str, Any]:
    scenario, extra = scenario_of(args.seeds, args.scenario, args.steps)
    k, sol, tally = args.agents, solution(scenario), Tally(args.server_pid)
    ids = agent_ids(k, scenario)
    clients = {aid: http_client(args.url, 2) for aid in ids}
    try:
        async with http_client(args.url, 2) as admin:
            window_end = trio.current_time() + args.duration
            while trio.current_time() < window_end and tally.runs < min(args.max_runs, MAX_RUNS):
                await _http_run(admin, clients, sol, ids, k, window_end, tally, args.next_wait, scenario, extra)
    finally:
        for c in clients.values():
            await c.aclose()
    return tally.result(mode="http-agents", agents=k, next_wait=args.next_wait, scenario=scenario, seeds=args.seeds)


async def _http_run(admin: httpx.AsyncClient, clients: dict[str, httpx.AsyncClient], sol: Any, ids: list[str],
                    k: int, window_end: float, tally: Tally, next_wait: bool = False, scenario: str = "warren",
                    extra: dict[str, Any] | None = None) -> None:
    t0 = wall_seconds()
    r = await send(admin, "POST", f"/v1/runs?scenario={scenario}&seed={tally.runs}", json=run_body(ids, k, extra))
    r.raise_for_status()
    run_id = r.json()["run_id"]
    tally.runs += 1
    agents: dict[str, tuple[str, Any]] = {}

    async def setup(aid: str) -> None:
        client = clients[aid]
        r = await send(client, "POST", f"/v1/runs/{run_id}/agents/{aid}/claim")
        r.raise_for_status()
        lease = r.json()["lease"]
        b = await send(client, "GET", f"/v1/runs/{run_id}/agents/{aid}/briefing?lease={lease}")
        b.raise_for_status()
        brief = b.json()
        agents[aid] = (lease, sol.make_policy(aid, brief["role"], brief))

    async with trio.open_nursery() as nursery:  # everyone but the last: the run starts with the last claim
        for aid in ids[:-1]:
            nursery.start_soon(setup, aid)
    tally.setup += wall_seconds() - t0

    # --next-wait: each command asks for the agent's next envelope in its reply (POST .../commands?wait=, a
    # WARREN extension): one request per decision; a poll only when the reply came without one.
    submit_q = f"&wait={POLL_WAIT_S:g}" if next_wait else ""

    async def play(aid: str) -> None:
        lease, policy = agents[aid]
        client = clients[aid]
        base = f"/v1/runs/{run_id}/agents/{aid}"
        after = -1
        env: dict[str, Any] | None = None
        for _ in range(MAX_DECISIONS_PER_AGENT):
            if env is None:
                r = await send(client, "GET", f"{base}/observations?after={after}&wait={POLL_WAIT_S:g}&lease={lease}")
                tally.requests += 1
                if r.status_code == 410:
                    return
                if r.status_code == 204:
                    continue
                r.raise_for_status()
                env = r.json()
            assert env is not None
            body = command_body(env, policy.decide(EnvelopeObservation(env)))
            c = await send(client, "POST", f"{base}/commands?lease={lease}{submit_q}", json=body)
            tally.requests += 1
            t = unix_now()
            c.raise_for_status()
            receipt = c.json()
            tally.accepted(receipt, env, t)
            after = env["seq"]
            env = receipt.get("next_observation")

    with trio.move_on_at(window_end) as window:
        async with trio.open_nursery() as nursery:
            for aid in ids[:-1]:
                nursery.start_soon(play, aid)
            tally.drive_start()
            await setup(ids[-1])
            nursery.start_soon(play, ids[-1])
    tally.drive_end()
    if window.cancelled_caught:
        tally.runs_cut += 1
        with trio.move_on_after(10):
            await send(admin, "DELETE", f"/v1/runs/{run_id}")


# -- WebSocket agents ------------------------------------------------------------------------------------
class RpcClient:
    """JSON-RPC 2.0 over one trio-websocket connection: a reader task, fire-and-forget or awaited calls."""

    def __init__(self, ws: Any, tally: Tally) -> None:
        self.ws = ws
        self.tally = tally
        self.next_id = 0
        self.replies: dict[int, Callable[[dict[str, Any], float], None]] = {}
        self.notes_send, self.notes = trio.open_memory_channel[dict[str, Any]](math.inf)

    async def reader(self) -> None:
        while True:
            try:
                raw = await self.ws.get_message()
            except wsclient.ConnectionClosed:
                return
            frame = orjson.loads(raw)
            t = unix_now()
            self.tally.frames_in += 1
            for msg in frame if isinstance(frame, list) else [frame]:  # batched frames: an array of messages
                if "method" in msg:
                    if msg["method"] == "ping" and "id" in msg:  # the server's heartbeat
                        await self.ws.send_message(orjson.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                                                 "result": msg.get("params", {})}).decode())
                    else:
                        self.notes_send.send_nowait(msg)
                    continue
                handler = self.replies.pop(msg.get("id"), None)
                if handler is not None:
                    handler(msg, t)

    async def send(self, method: str, params: dict[str, Any],
                   on_reply: Callable[[dict[str, Any], float], None]) -> None:
        self.next_id += 1
        self.replies[self.next_id] = on_reply
        self.tally.frames_out += 1
        # orjson: at one agent the client's own encoding was a third of its CPU per decision (json.dumps)
        await self.ws.send_message(orjson.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                                 "params": params}).decode())

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        box: list[dict[str, Any]] = []
        done = trio.Event()

        def got(msg: dict[str, Any], t: float) -> None:
            box.append(msg)
            done.set()

        await self.send(method, params, got)
        await done.wait()
        if "error" in box[0]:
            raise RuntimeError(f"{method}: {box[0]['error']}")
        return box[0]["result"]


# What the forager reads (scenarios/warren/solution.py): a WebSocket client subscribes to those observation
# fields only (agent.claim's ``parts``), as a client of the binding that knows its policy would; the server then
# builds no text, no affordances and no unread field for it (runtime/views.py WireEnvelope).
WS_PARTS = ("busy", "you", "place", "objectives")
# echo's policy reads nothing of its observation; its client takes the agent's own state ("you"), the smallest
# observation that still says something (OpenEnv's echo observation is likewise a few fields).
PARTS_OF = {"warren": WS_PARTS, "warren_trips": WS_PARTS, "echo": ("you",)}


class SleepPolicy:
    """``--answer sleep`` (issue 30's workload): every observation answered with ``{"sleep_ms": 1}``, so every
    agent wakes in every batch; its client takes the default subscription (every part: text, affordances and
    all), as a user's agent that reads its whole observation would."""

    def decide(self, obs: Any) -> dict[str, Any]:
        return {"sleep_ms": 1}


class WsAgents:
    """Leases and policies of one run's agents; an agent's policy may arrive after its first envelope.
    ``parts=None``: claim with the default subscription and answer every observation with ``{"sleep_ms": 1}``."""

    def __init__(self, run_id: str, sol: Any, parts: tuple[str, ...] | None = WS_PARTS) -> None:
        self.run_id, self.sol, self.parts = run_id, sol, None if parts is None else list(parts)
        self.ready: dict[str, tuple[str, Any]] = {}
        self.events: dict[str, trio.Event] = {}

    async def setup(self, rpc: RpcClient, aid: str) -> None:
        params: dict[str, Any] = {"run_id": self.run_id, "agent_id": aid}
        if self.parts is not None:
            params["parts"] = self.parts
        claim = await rpc.call("agent.claim", params)
        brief = await rpc.call("agent.briefing", {"run_id": self.run_id, "agent_id": aid, "lease": claim["lease"]})
        policy = SleepPolicy() if self.parts is None else self.sol.make_policy(aid, brief["role"], brief)
        self.ready[aid] = (claim["lease"], policy)
        self.events.setdefault(aid, trio.Event()).set()

    async def get(self, aid: str) -> tuple[str, Any]:
        if aid not in self.ready:
            await self.events.setdefault(aid, trio.Event()).wait()
        return self.ready[aid]


async def _decide(rpc: RpcClient, agents: WsAgents, tally: Tally, batched: bool) -> None:
    """Answer every envelope as it arrives; return on the run's end (``run.status``)."""
    async for msg in rpc.notes:
        method = msg["method"]
        if method == "run.status":
            return
        if method == "observation":
            items = [msg["params"]]
        elif method == "observations":
            items = msg["params"]["envelopes"]
        else:
            continue  # outcome notifications
        envs, commands = [], []
        for item in items:
            env = item["envelope"]
            aid = env["agent_id"]
            lease, policy = await agents.get(aid)
            commands.append({"run_id": agents.run_id, "agent_id": aid, "lease": lease,
                             "command": command_body(env, policy.decide(EnvelopeObservation(env)))})
            envs.append(env)
        if batched:
            def on_many(reply: dict[str, Any], t: float, envs: list[dict[str, Any]] = envs) -> None:
                results = reply.get("result", {}).get("results", [{}] * len(envs))
                for env, res in zip(envs, results, strict=True):
                    tally.accepted(res.get("receipt"), env, t)

            await rpc.send("agent.submit_many", {"commands": commands}, on_many)
        else:
            for env, params in zip(envs, commands, strict=True):
                def on_one(reply: dict[str, Any], t: float, env: dict[str, Any] = env) -> None:
                    tally.accepted(reply.get("result"), env, t)

                await rpc.send("agent.submit", params, on_one)


def _ws_url(url: str) -> str:
    return "ws" + url.removeprefix("http") + "/v1/agent"


async def _open_rpc(nursery: trio.Nursery, url: str, tally: Tally) -> RpcClient:
    # bench/wsclient.py: RFC 6455 framing in the reader's own task (trio-websocket's reader task, channel and
    # generic framing cost ~330 us of client CPU per one-agent decision, half of every round trip's client side)
    ws = await wsclient.connect(url, [("X-Warren-Protocol", "warren-agent/0")], max_message_size=16 * 2**20)
    rpc = RpcClient(ws, tally)
    nursery.start_soon(rpc.reader)
    # batched frames: a submit_many's reply and the envelopes it set off leave in one frame (one write)
    await rpc.call("initialize", {"protocol": "warren-agent/0", "frames": "batched"})
    return rpc


async def ws_agents(args: argparse.Namespace) -> dict[str, Any]:
    scenario, extra = scenario_of(args.seeds, args.scenario, args.steps)
    k, sol, tally = args.agents, solution(scenario), Tally(args.server_pid)
    ids = agent_ids(k, scenario)
    one = args.connections == "one"
    url = _ws_url(args.url)
    async with http_client(args.url, 4) as http:
        window_end = trio.current_time() + args.duration
        while trio.current_time() < window_end and tally.runs < min(args.max_runs, MAX_RUNS):
            t0 = wall_seconds()
            r = await send(http, "POST", f"/v1/runs?scenario={scenario}&seed={tally.runs}",
                           json=run_body(ids, k, extra))
            r.raise_for_status()
            run_id = r.json()["run_id"]
            tally.runs += 1
            agents = WsAgents(run_id, sol, None if args.answer == "sleep" else PARTS_OF[scenario])
            with trio.move_on_at(window_end) as window:
                async with trio.open_nursery() as conns:  # the connections live as long as the run
                    if one:
                        rpc = await _open_rpc(conns, url, tally)
                        rpcs = {aid: rpc for aid in ids}
                    else:
                        opened = await _gather([_open_rpc(conns, url, tally) for _ in ids])
                        rpcs = dict(zip(ids, opened, strict=True))
                    await _gather([agents.setup(rpcs[aid], aid) for aid in ids[:-1]])
                    tally.setup += wall_seconds() - t0
                    async with trio.open_nursery() as players:
                        for rpc in dict.fromkeys(rpcs.values()):
                            players.start_soon(_decide, rpc, agents, tally, one)
                        tally.drive_start()
                        await agents.setup(rpcs[ids[-1]], ids[-1])
                    tally.drive_end()
                    for rpc in dict.fromkeys(rpcs.values()):  # a closing handshake, then the readers stop
                        with trio.move_on_after(5):
                            await rpc.ws.aclose()
                    conns.cancel_scope.cancel()
            if window.cancelled_caught:
                tally.drive_end()
                tally.runs_cut += 1
                with trio.move_on_after(10):
                    await send(http, "DELETE", f"/v1/runs/{run_id}")
    return tally.result(mode="ws-agents", connections=args.connections, agents=k, scenario=scenario,
                        answer=args.answer, **extra)


async def ws_runs(args: argparse.Namespace) -> dict[str, Any]:
    """``--agents R`` one-agent runs on ONE connection, played at once: the binding's analogue of R OpenEnv
    sessions (R independent environments of one agent each), multiplexed.

    The runs are created and claimed before the window opens (as ``ws-agents`` claims all but its last agent
    and OpenEnv's sessions are opened before theirs); the window then holds their decisions and ends, and closes
    when every run has ended or the duration is up. Envelopes of every run that woke leave in one frame and are
    answered by one ``agent.submit_many``.
    """
    scenario, extra = scenario_of(args.seeds)
    sol, tally = solution(scenario), Tally(args.server_pid)
    (aid,) = agent_ids(1, scenario)
    policies: dict[str, tuple[str, Any]] = {}
    live: set[str] = set()
    all_ended = trio.Event()
    async with http_client(args.url, 4) as http, trio.open_nursery() as conns:
        rpc = await _open_rpc(conns, _ws_url(args.url), tally)
        t0 = wall_seconds()

        async def setup(i: int) -> None:
            r = await send(http, "POST", f"/v1/runs?scenario={scenario}&seed={i}", json=run_body([aid], 1, extra))
            r.raise_for_status()
            run_id = r.json()["run_id"]
            claim = await rpc.call("agent.claim", {"run_id": run_id, "agent_id": aid, "parts": list(WS_PARTS)})
            brief = await rpc.call("agent.briefing", {"run_id": run_id, "agent_id": aid, "lease": claim["lease"]})
            policies[run_id] = (claim["lease"], sol.make_policy(aid, brief["role"], brief))
            live.add(run_id)

        await _gather([setup(i) for i in range(min(args.agents, args.max_runs, MAX_RUNS))])
        tally.runs = len(live)
        tally.setup += wall_seconds() - t0

        async def answer() -> None:
            async for msg in rpc.notes:
                method, params = msg["method"], msg["params"]
                if method == "run.status":
                    live.discard(params["run_id"])
                    if not live:
                        all_ended.set()
                    continue
                if method not in ("observation", "observations"):
                    continue  # outcomes (they also ride inside observation frames)
                items = [params] if method == "observation" else params["envelopes"]
                envs, commands = [], []
                for item in items:
                    env = item["envelope"]
                    lease, policy = policies[env["run_id"]]
                    commands.append({"run_id": env["run_id"], "agent_id": aid, "lease": lease,
                                     "command": command_body(env, policy.decide(EnvelopeObservation(env)))})
                    envs.append(env)

                def on_many(reply: dict[str, Any], t: float, envs: list[dict[str, Any]] = envs) -> None:
                    results = reply.get("result", {}).get("results", [{}] * len(envs))
                    for env, res in zip(envs, results, strict=True):
                        tally.accepted(res.get("receipt"), env, t)

                await rpc.send("agent.submit_many", {"commands": commands}, on_many)

        tally.drive_start()
        with trio.move_on_after(args.duration):
            async with trio.open_nursery() as players:
                players.start_soon(answer)
                await all_ended.wait()
                players.cancel_scope.cancel()
        tally.drive_end()
        tally.runs_cut = len(live)
        with trio.move_on_after(10):
            for run_id in list(live):
                await send(http, "DELETE", f"/v1/runs/{run_id}")
        with trio.move_on_after(5):
            await rpc.ws.aclose()
        conns.cancel_scope.cancel()
    return tally.result(mode="ws-runs", connections="one", agents=args.agents, scenario=scenario, **extra)


async def _gather(coros: list[Any]) -> list[Any]:
    out: list[Any] = [None] * len(coros)

    async def one(i: int, coro: Any) -> None:
        out[i] = await coro

    async with trio.open_nursery() as nursery:
        for i, coro in enumerate(coros):
            nursery.start_soon(one, i, coro)
    return out


# -- the ceiling -----------------------------------------------------------------------------------------
async def trivial(args: argparse.Namespace) -> dict[str, Any]:
    k = args.agents
    counts = [0] * k
    lat: list[float] = []
    body = {"command_id": "c-forager-1#0", "observation_id": "forager-1#0", "sleep_ms": 1000}
    clients = [http_client(args.url, 2) for _ in range(k)]
    try:
        async def warm(client: httpx.AsyncClient) -> None:
            (await send(client, "GET", "/trivial")).raise_for_status()

        await _gather([warm(c) for c in clients])

        async def loop(i: int) -> None:
            client = clients[i]
            for _ in range(10_000_000):
                t0 = wall_seconds()
                r = await send(client, "GET", "/trivial")
                r.raise_for_status()
                r.json()
                c = await send(client, "POST", "/trivial", json=body)
                c.raise_for_status()
                c.json()
                counts[i] += 2
                lat.append(wall_seconds() - t0)

        cpu0 = proc_cpu_seconds(args.server_pid) if args.server_pid else 0.0
        own0 = own_cpu_seconds()
        t0 = wall_seconds()
        with trio.move_on_after(args.duration):
            async with trio.open_nursery() as nursery:
                for i in range(k):
                    nursery.start_soon(loop, i)
        elapsed = wall_seconds() - t0
        cpu = (proc_cpu_seconds(args.server_pid) - cpu0) if args.server_pid else 0.0
        own = own_cpu_seconds() - own0
    finally:
        for c in clients:
            await c.aclose()
    n = sum(counts)
    pair_ms = [x * 1000 for x in lat]
    return {"mode": "trivial", "loops": k, "requests": n, "elapsed_s": elapsed, "requests_per_s": n / elapsed,
            "pair_latency_ms": {"p50": percentile(pair_ms, 50), "p99": percentile(pair_ms, 99)},
            "server_cpu_s": cpu, "server_cpu_us_per_request": 1e6 * cpu / n if n else None,
            "client_cpu_s": own, "client_cpu_us_per_request": 1e6 * own / n if n else None}


# -- scale: N long-polls at once --------------------------------------------------------------------------
async def scale(args: argparse.Namespace) -> dict[str, Any]:
    """Claim every agent of ``--run`` but one, hold a long-poll for each, then claim the last (the run
    starts: one batch of N envelopes). Measures publish -> receipt of each envelope, answers each with a noop."""
    shard = 4  # agents per client (see http_client)
    run_id = args.run
    clients = [http_client(args.url, shard + 1) for _ in range(0, args.agents, shard)]
    try:
        view = (await send(clients[0], "GET", f"/v1/runs/{run_id}")).json()
        ids = [a["agent_id"] for a in view["agents"] if a["controlled"]]
        n = len(ids)
        client_of = {aid: clients[i // shard] for i, aid in enumerate(ids)}
        leases: dict[str, str] = {}
        limit = trio.Semaphore(64)

        async def claim(aid: str) -> None:
            async with limit:
                r = await send(client_of[aid], "POST", f"/v1/runs/{run_id}/agents/{aid}/claim")
                r.raise_for_status()
                leases[aid] = r.json()["lease"]

        async def claim_bulk(chunk: list[str]) -> None:
            # not retried on a lost answer (the agents would be held by tokens never seen): send() retries
            # only what the server never saw, and a failure here fails the measurement, loudly
            r = await client_of[chunk[0]].post(f"/v1/runs/{run_id}/claim", json={"agents": chunk})
            r.raise_for_status()
            leases.update(r.json()["leases"])

        # Every agent but the last (whose claim starts the run: the batch): with --claim bulk, lists of
        # BULK_CHUNK ids per request (POST /v1/runs/{run}/claim; 9,999 ids do not fit one 64 KiB body, and
        # "all" would start the run before the polls are held); with --claim single, one request per agent.
        log(f"scale: claiming {n - 1} agents of {run_id} ({args.claim})")
        t0 = wall_seconds()
        with trio.fail_after(args.timeout):
            if args.claim == "bulk":
                for i in range(0, n - 1, BULK_CHUNK):
                    await claim_bulk(ids[i:min(i + BULK_CHUNK, n - 1)])
            else:
                async with trio.open_nursery() as nursery:
                    for aid in ids[:-1]:
                        nursery.start_soon(claim, aid)
        claim_s = wall_seconds() - t0
        log(f"scale: claimed in {claim_s:.2f} s; opening {n - 1} long-polls")

        received: list[float] = []
        accepted: list[float] = []
        publish: list[float] = []
        statuses: dict[str, int] = {}
        verdicts: dict[str, int] = {}

        # At most CONNECTING polls between "task started" and "request sent", so the connections never
        # overflow Hypercorn's accept backlog (100): overflowing it costs SYN/ACK retransmissions of 1 s, 3 s,
        # 7 s... and polls that reach the server long after the batch was published.
        connecting = trio.Semaphore(50)
        sent: list[int] = [0]
        everyone_woke = trio.Event()
        answering = trio.Semaphore(64)  # answers in flight (each may need a new connection: same backlog)

        async def poll_and_answer(group: list[str]) -> None:
            """Long-poll for ``group``'s first envelopes (one GET per agent, or with --poll many one
            POST /v1/runs/{run}/observations for the whole group), then answer each with a noop."""
            c = client_of[group[0]]
            slot = [True]
            await connecting.acquire()

            async def trace(event: str, info: dict[str, Any]) -> None:
                if event == "http11.send_request_headers.complete" and slot[0]:
                    slot[0] = False
                    sent[0] += len(group)
                    connecting.release()

            try:
                for _ in range(10):  # a 204 (the wait ran out) is retried; bounded
                    if len(group) == 1 and args.poll == "single":
                        aid = group[0]
                        r = await send(c, "GET", f"/v1/runs/{run_id}/agents/{aid}/observations?after=-1&wait=55"
                                       f"&lease={leases[aid]}", extensions={"trace": trace})
                    else:
                        body: dict[str, Any] = {"leases": {aid: leases[aid] for aid in group}}
                        if args.parts:
                            body["parts"] = args.parts.split(",")
                        r = await send(c, "POST", f"/v1/runs/{run_id}/observations?wait=55", json=body,
                                       extensions={"trace": trace})
                    if r.status_code != 204:
                        break
                t = unix_now()  # on receipt, before parsing: the client's own JSON cost is not the wake's
                statuses[str(r.status_code)] = statuses.get(str(r.status_code), 0) + 1
                if r.status_code != 200:
                    return
                if args.poll == "many":
                    # Parsed once the whole batch is in (below): parsing 500 envelopes (~1 MB, ~5 ms with orjson)
                    # holds this one thread and delays the receipt of the replies behind it. Counted meanwhile
                    # by the group's size (each polled agent wakes in the first batch; checked when parsed).
                    replies.append((t, r.content))
                    counted[0] += len(group)
                    if counted[0] == n:
                        everyone_woke.set()
                    await everyone_woke.wait()
                    if len(group) > 1:
                        return  # the multi-poll passes measure the wake only: answering is the single pass's
                # orjson: cheaper than json (the single pass parses each envelope as it comes)
                body = orjson.loads(r.content)
                envs = body["observations"] if "observations" in body else [body]
                if args.poll != "many":
                    for env in envs:
                        received.append(t)
                        publish.append(env["deadline_unix"] - args.deadline_s)
                if len(received) == n:
                    log(f"scale: all {n} envelopes received, {t - min(publish):.2f} s after the batch's publication")
                    everyone_woke.set()
                # Answer only once the whole batch is delivered: answering while envelopes are still going out
                # would load the server and slow the very deliveries being measured.
                await everyone_woke.wait()
                for env in envs:
                    aid = env["agent_id"]
                    async with answering:
                        a = await send(client_of[aid], "POST",
                                       f"/v1/runs/{run_id}/agents/{aid}/commands?lease={leases[aid]}",
                                       json=command_body(env, {"noop": True}))
                    verdict = a.json().get("status", str(a.status_code)) if a.status_code == 200 \
                        else str(a.status_code)
                    verdicts[verdict] = verdicts.get(verdict, 0) + 1
                    if verdict == "accepted":
                        accepted.append(unix_now())
            except httpx.HTTPError as exc:  # counted and reported: a slow server is a result, not a crash
                statuses[type(exc).__name__] = statuses.get(type(exc).__name__, 0) + 1
            finally:
                if slot[0]:
                    connecting.release()

        replies: list[tuple[float, bytes]] = []  # --poll many: (received at, body), parsed after the batch
        counted = [0]
        rss: dict[str, int] = {}
        hold_s = quiet_s = woke_at = float("nan")
        not_measured = ""
        if args.poll == "single" and args.poll_client == "lean":
            lean = await _scale_single_lean(args, run_id, ids, leases, claim)
            rss, hold_s, quiet_s, woke_at, not_measured = (lean["rss"], lean["hold_s"], lean["quiet_s"],
                                                           lean["woke_at"], lean["not_measured"])
            sent[0] = lean["sent"]
            statuses.update(lean["statuses"])
            timed_out = lean["timed_out"]
            envelopes: list[dict[str, Any]] = []
            for t, body in lean["replies"]:
                env = orjson.loads(body)
                received.append(t)
                publish.append(env["deadline_unix"] - args.deadline_s)
                envelopes.append(env)

            async def answer(env: dict[str, Any]) -> None:
                aid = env["agent_id"]
                try:
                    async with answering:
                        a = await send(client_of[aid], "POST",
                                       f"/v1/runs/{run_id}/agents/{aid}/commands?lease={leases[aid]}",
                                       json=command_body(env, {"noop": True}))
                except httpx.HTTPError as exc:
                    verdicts[type(exc).__name__] = verdicts.get(type(exc).__name__, 0) + 1
                    return
                verdict = a.json().get("status", str(a.status_code)) if a.status_code == 200 else str(a.status_code)
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
                if verdict == "accepted":
                    accepted.append(unix_now())

            with trio.move_on_after(args.timeout / 2):
                async with trio.open_nursery() as nursery:
                    for env in envelopes if not args.no_answers else []:
                        nursery.start_soon(answer, env)
        else:
            with trio.move_on_after(args.timeout) as overall:
                async with trio.open_nursery() as nursery:
                    t1 = wall_seconds()
                    size = POLL_GROUP if args.poll == "many" else 1
                    for i in range(0, n - 1, size):
                        nursery.start_soon(poll_and_answer, ids[i:min(i + size, n - 1)])
                    # every poll request is on the wire (bounded: half the whole bound; a busy machine once took
                    # minutes, and measuring a batch half the polls have not reached is no measurement)
                    while sent[0] < n - 1 and wall_seconds() - t1 < args.timeout / 2:
                        await trio.sleep(0.05)
                    if sent[0] < 0.9 * (n - 1):
                        not_measured = f"only {sent[0]:,} of {n - 1:,} long-polls were sent within {args.timeout / 2:.0f} s"
                        log(f"scale: not measured: {not_measured}")
                        nursery.cancel_scope.cancel()
                    else:  # all of them, or nearly: the batch is measured, the missing polls counted and reported
                        quiet_s = await wait_quiet(args.server_pid, limit_s=60.0)  # ... and parked in the server
                        hold_s = wall_seconds() - t1
                        rss["holding_kib"] = proc_status_kib(args.server_pid, "VmRSS")
                        log(f"scale: {sent[0]} polls sent, server quiet; RSS {rss['holding_kib'] // 1024} MiB; "
                            "claiming the last agent (the batch)")
                        # This process's cycle collector is paused while the batch is delivered: 10,000 envelopes
                        # parsed into dicts set off its full passes over this process's heap (2,500 clients),
                        # 70-180 ms each, measured as gaps between receipts: the load's cost, not the server's.
                        gc.collect()
                        gc.disable()
                        try:
                            await claim(ids[-1])
                            nursery.start_soon(poll_and_answer, [ids[-1]])
                            with trio.move_on_after(args.timeout / 4):
                                await everyone_woke.wait()
                        finally:
                            gc.enable()
                        woke_at = unix_now()
                        everyone_woke.set()  # some envelope never came: answer those that did
            timed_out = overall.cancelled_caught
        for t, raw in replies:
            for env in orjson.loads(raw)["observations"]:
                received.append(t)
                publish.append(env["deadline_unix"] - args.deadline_s)
        replies.clear()
        log(f"scale: {len(received)} envelopes received, {len(accepted)} answers accepted")
        rss["after_kib"] = proc_status_kib(args.server_pid, "VmRSS")
        rss["peak_kib"] = proc_status_kib(args.server_pid, "VmHWM")
        p0 = min(publish) if publish else float("nan")
        wake_ms = [(t - p) * 1000 for t, p in zip(received, publish, strict=True)]
        with trio.move_on_after(30):
            await send(clients[0], "DELETE", f"/v1/runs/{run_id}")
        claim_all = {}
        if args.claim == "bulk":
            await wait_quiet(args.server_pid, limit_s=60.0)  # the cancelled run's polls have had their 410s
            claim_all = await _claim_all(clients[0], n, args.timeout / 4)
    finally:
        for c in clients:
            with trio.move_on_after(10):
                await c.aclose()
    return {"mode": "scale", "poll": args.poll, "parts": args.parts, "agents": n, "claim_s": claim_all.get("claim_s", claim_s), "claim_how": args.claim,
            "claim_first_n_minus_1_s": claim_s, "claim_all": claim_all,
            "not_measured": not_measured, "polls_held_after_s": hold_s, "quiet_wait_s": quiet_s,
            "polls_sent_before_batch": sent[0],
            "statuses": statuses, "timed_out": timed_out,
            "wake_latency_ms": {"min": min(wake_ms) if wake_ms else float("nan"), "p50": percentile(wake_ms, 50), "p99": percentile(wake_ms, 99),
                                "max": max(wake_ms) if wake_ms else float("nan"), "n": len(wake_ms)},
            "all_answered_after_publish_s": (max(accepted) - p0) if accepted else float("nan"),
            "answer_phase_s": (max(accepted) - woke_at) if accepted else float("nan"), "answer_verdicts": verdicts,
            "decision_deadline_s": args.deadline_s,
            "answered": len(accepted), "server_rss": rss,
            "client_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


async def _scale_single_lean(args: argparse.Namespace, run_id: str, ids: list[str], leases: dict[str, str],
                             claim: Callable[[str], Any]) -> dict[str, Any]:
    """``scale --poll single --poll-client lean``: the N long-polls held by :class:`bench.pollclient.PollSwarm`
    (one epoll loop in a thread, each reply stamped on the receipt of its last byte), the rest as the httpx
    pass does it: every poll on the wire, the server quiet, then the last agent claimed (the batch).

    Returns the replies (``(received_unix, body)`` of each 200) and what the pass saw; the caller parses them
    after the batch and answers each with a noop."""
    n = len(ids)
    where = urlsplit(args.url)
    swarm = PollSwarm(where.hostname or "127.0.0.1", where.port or 80, PROTO)

    def path(aid: str) -> str:
        return f"/v1/runs/{run_id}/agents/{aid}/observations?after=-1&wait=55&lease={leases[aid]}"

    for aid in ids[:-1]:
        swarm.add(aid, path(aid))
    thread = threading.Thread(target=swarm.run, args=(args.timeout,), name="poll-swarm", daemon=True)
    rss: dict[str, int] = {}
    hold_s = quiet_s = woke_at = float("nan")
    not_measured = ""
    thread.start()
    try:
        with trio.move_on_after(args.timeout) as overall:
            t1 = wall_seconds()
            while swarm.sent + sum(swarm.errors.values()) < n - 1 and wall_seconds() - t1 < args.timeout / 2:
                await trio.sleep(0.05)
            if swarm.sent < 0.9 * (n - 1):
                not_measured = f"only {swarm.sent:,} of {n - 1:,} long-polls were sent within {args.timeout / 2:.0f} s"
                log(f"scale: not measured: {not_measured}")
            else:
                log(f"scale: {swarm.sent} polls on the server after {wall_seconds() - t1:.1f} s; waiting for it to be quiet")
                quiet_s = await wait_quiet(args.server_pid, limit_s=60.0)
                hold_s = wall_seconds() - t1
                rss["holding_kib"] = proc_status_kib(args.server_pid, "VmRSS")
                log(f"scale: {swarm.sent} polls sent (lean client), server quiet; RSS {rss['holding_kib'] // 1024} "
                    "MiB; claiming the last agent (the batch)")
                gc.collect()
                gc.disable()  # as the httpx pass: no cycle-collector pass of this process during the batch
                try:
                    await claim(ids[-1])
                    swarm.add(ids[-1], path(ids[-1]))
                    swarm.stop()
                    with trio.move_on_after(args.timeout / 4):
                        while swarm.done < swarm.expected:
                            await trio.sleep(0.02)
                finally:
                    gc.enable()
                woke_at = unix_now()
                log(f"scale: {len(swarm.replies)} replies in (lean client), errors {swarm.errors}")
    finally:
        swarm.stop()
        await trio.to_thread.run_sync(thread.join, 10.0)
        swarm.close()
    statuses: dict[str, int] = {}
    for _, status, _ in swarm.replies.values():
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    for kind, count in swarm.errors.items():
        statuses[kind] = statuses.get(kind, 0) + count
    for kind, count in swarm.retried.items():  # reported with httpx's retries (transport_retries)
        _RETRIED[f"poll {kind}"] = _RETRIED.get(f"poll {kind}", 0) + count
    return {"replies": [(t, body) for t, status, body in swarm.replies.values() if status == 200],
            "statuses": statuses, "sent": swarm.sent, "rss": rss, "hold_s": hold_s, "quiet_s": quiet_s,
            "woke_at": woke_at, "not_measured": not_measured, "timed_out": overall.cancelled_caught}


async def _claim_all(client: httpx.AsyncClient, n: int, bound: float) -> dict[str, Any]:
    """Claiming N agents as a client would: a second N-agent run (created, not timed), claimed with one
    ``{"agents": "all"}`` request, timed to its reply (which also starts the run: its first batch is built
    before the reply leaves, so that is in the figure), then cancelled. Measured after the batch's memory
    was read, so this run's memory is not in the long-poll figures."""
    with trio.move_on_after(bound):
        r = await client.post("/v1/runs?scenario=warren&seed=2", json={
            "controlled_agents": "all", "npc_policy": "none", "params": {"agents": n}})
        r.raise_for_status()
        run_id = r.json()["run_id"]
        t0 = wall_seconds()
        c = await client.post(f"/v1/runs/{run_id}/claim", json={"agents": "all"})
        claim_s = wall_seconds() - t0
        c.raise_for_status()
        leases = c.json()["leases"]
        await send(client, "DELETE", f"/v1/runs/{run_id}")
        log(f"scale: a second run's {len(leases):,} agents claimed with one request in {claim_s:.2f} s")
        return {"claim_s": claim_s, "agents": len(leases), "reply_bytes": len(c.content)}
    return {}


async def wait_quiet(pid: int, *, limit_s: float, window_s: float = 0.5, busy_frac: float = 0.05) -> float:
    """Wait until the server uses under ``busy_frac`` of a core over ``window_s`` (its polls are all parked)."""
    t0 = wall_seconds()
    while wall_seconds() - t0 < limit_s:
        c0 = proc_cpu_seconds(pid)
        await trio.sleep(window_s)
        if proc_cpu_seconds(pid) - c0 < busy_frac * window_s:
            break
    return wall_seconds() - t0


# -- entry point -------------------------------------------------------------------------------------------
MODES = {"http-agents": http_agents, "ws-agents": ws_agents, "ws-runs": ws_runs, "trivial": trivial,
         "scale": scale}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--url", required=True)
    p.add_argument("--agents", type=int, default=1, help="agents (or loops for trivial)")
    p.add_argument("--duration", type=float, default=3.0, help="seconds of load")
    p.add_argument("--server-pid", type=int, default=0, help="read this process's CPU time (and RSS for scale)")
    p.add_argument("--connections", choices=("one", "many"), default="one")
    p.add_argument("--seeds", type=int, default=0,
                   help="ws-agents, http-agents: play bench/scenarios/warren_trips with this many seeds (trips) "
                        "per forager")
    p.add_argument("--scenario", choices=("warren", "echo"), default="warren",
                   help="ws-agents, http-agents: the scenario played (echo: bench/scenarios/echo, every agent in "
                        "every batch, a trivial answer each; --seeds picks warren_trips instead)")
    p.add_argument("--answer", choices=("policy", "sleep"), default="policy",
                   help="ws-agents: the scenario's solution policy on the parts it reads (default), or every "
                        "observation answered with {\"sleep_ms\": 1} on the default subscription (issue 30)")
    p.add_argument("--steps", type=int, default=0, help="--scenario echo: ticks a run (default: the scenario's)")
    p.add_argument("--max-runs", type=int, default=MAX_RUNS)
    p.add_argument("--next-wait", action="store_true",
                   help="http-agents: each command asks for the next envelope in its reply (?wait=)")
    p.add_argument("--run", help="scale: the run to claim")
    p.add_argument("--timeout", type=float, default=180.0, help="scale: give up after this many seconds")
    p.add_argument("--claim", choices=("bulk", "single"), default="bulk",
                   help="scale: claim with POST /v1/runs/{run}/claim (lists of ids) or one request per agent")
    p.add_argument("--poll", choices=("single", "many"), default="single",
                   help="scale: one GET long-poll per agent, or POST /v1/runs/{run}/observations per 500 agents")
    p.add_argument("--poll-client", choices=["lean", "httpx"], default="lean",
                   help="scale --poll single: the lean raw-socket client (bench/pollclient.py) or one httpx client "
                        "per 4 agents")
    p.add_argument("--no-answers", action="store_true",
                   help="scale --poll single --poll-client lean: measure the wake only, answer nothing (A/B runs)")
    p.add_argument("--parts", default="", help="scale --poll many: narrow the envelopes to these parts (a,b,...)")
    p.add_argument("--deadline-s", type=float, default=DEADLINE_S, help="scale: the run's decision_deadline_s")
    args = p.parse_args(argv)
    _check_loopback(args.url)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    result = trio.run(MODES[args.mode], args)
    result["transport_retries"] = _RETRIED
    sys.stdout.write(json.dumps(result, allow_nan=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
