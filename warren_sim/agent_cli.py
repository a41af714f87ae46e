"""``warren agent``, ``warren demo`` and ``warren conformance``: the client side on the command line.

``warren agent URL --run RUN --agent AGENT`` drives one remote agent of a served run with a policy through
the blocking SDK (printing each observation's text and the command it chose) until the run ends; with
``--transport ws`` through the trio SDK over the WebSocket binding instead. ``warren
demo`` shows the whole protocol in one process: a real server on a free loopback port, a ``bridge_repair``
run (seed 3) whose ``engineer-1`` is driven over HTTP by the trio SDK with the scenario's own solution
policy, a condensed live transcript, and the run's summary. ``warren conformance URL`` checks any
warren-agent/0 server rule by rule (:mod:`warren_sim.conformance`).

This is composition-root code (like :mod:`warren_sim.cli`): it may wire the SDK to scenarios and servers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED = 0, 1


def register(sub: Any) -> None:
    p = sub.add_parser("agent", help="drive one remote agent of a served run with a policy")
    p.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--run", required=True, help="the run id, e.g. run-1")
    p.add_argument("--agent", required=True, help="a controlled agent of the run")
    p.add_argument("--policy", default="solution", help="solution (the scenario's), random, or module:callable")
    p.add_argument("--lease", help="resume a lease you hold (the token printed when it was claimed)")
    p.add_argument("--wait", type=float, default=25.0, help="long-poll wait per request, seconds (default 25); "
                   "over ws, how often an idle agent refreshes its lease")
    p.add_argument("--transport", choices=("http", "ws"), default="http",
                   help="http: long-polling (default, canonical); ws: the WebSocket binding WS /v1/agent")
    p.set_defaults(func=cmd_agent)

    p = sub.add_parser("demo", help="serve, create a bridge_repair run and drive engineer-1 over HTTP, live")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--full-text", action="store_true", help="print each observation's full text")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("conformance", help="check a warren-agent/0 server against the protocol, rule by rule")
    p.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--scenario", help="scenario to create runs of (default bridge_repair, else the first)")
    p.set_defaults(func=cmd_conformance)


def _show_command(command: dict[str, Any]) -> str:
    if "action" in command:
        return f"{command['action']} {json.dumps(command.get('args', {}), ensure_ascii=False)}"
    if "sleep_ms" in command:
        return f"sleep {command['sleep_ms']} ms"
    return "noop" if command.get("noop") is True else json.dumps(command, ensure_ascii=False)


def _show_receipt(receipt: Any) -> str:
    text = receipt.status
    if receipt.status in ("accepted", "duplicate"):
        text += f" (outcome {receipt.outcome})"
    if receipt.detail:
        text += f": {receipt.detail}"
    return text


def make_policy(kind: str, scenario: str, agent_id: str, briefing: dict[str, Any], seed: int) -> Any:
    from .cli import UsageError
    from .scenarios import ScenarioError, load_scenario

    try:
        return load_scenario(scenario).make_policy(kind, agent_id, str(briefing.get("role", "")), briefing, seed)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


# --------------------------------------------------------------------------------------------- warren agent


def _claimed_line(args: argparse.Namespace, view: Any, agent: Any) -> str:
    how = "resumed" if agent.resumed else "claimed"
    over = " over WebSocket" if args.transport == "ws" else ""
    return (f"{how} {args.agent} of {args.run} ({view.scenario} seed {view.seed}){over}; lease {agent.lease} "
            "(resume with --lease)")


def _interrupted(args: argparse.Namespace, lease: str) -> int:
    print(f"\ninterrupted; {args.agent} stays claimed until its lease expires: resume with --lease {lease}",
          file=sys.stderr)
    return 130


def _ended(args: argparse.Namespace, status: str) -> int:
    print(f"\n{args.run} ended: {status}")
    return EXIT_OK if status == "completed" else EXIT_FAILED


def cmd_agent(args: argparse.Namespace) -> int:
    if getattr(args, "transport", "http") == "ws":
        return _agent_over_ws(args)
    from .client import AgentClient, ServerError, TransportError

    with AgentClient.open(args.url, timeout=10.0) as client:
        try:
            view = client.get_run(args.run)
            agent = client.claim(args.run, args.agent, lease=args.lease)
        except (ServerError, TransportError) as exc:
            print(f"warren agent: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(_claimed_line(args, view, agent), flush=True)
        try:
            with agent:
                try:
                    briefing = agent.briefing()
                    policy = make_policy(args.policy, view.scenario, args.agent, briefing, view.seed)
                    for obs in agent.observations(wait=args.wait):
                        print(f"\n--- {obs.observation_id} ---\n{obs.text}")
                        command = policy.decide(obs)
                        receipt = agent.submit(obs, command)
                        print(f">>> {_show_command(command)}  [{_show_receipt(receipt)}]", flush=True)
                except KeyboardInterrupt:
                    agent.detach()  # before leaving `with`, which would release the agent otherwise
                    raise
        except KeyboardInterrupt:
            return _interrupted(args, agent.lease)
        except (ServerError, TransportError) as exc:
            print(f"warren agent: {exc}", file=sys.stderr)
            return EXIT_FAILED
        status = agent.run_status or client.get_run(args.run).status
    return _ended(args, status)


def _agent_over_ws(args: argparse.Namespace) -> int:
    """``warren agent --transport ws``: the same loop on the trio SDK over ``WS /v1/agent`` (runs over HTTP)."""
    import trio

    held: dict[str, str] = {}  # the lease, for the Ctrl-C message
    try:
        return trio.run(_agent_ws_main, args, held)
    except KeyboardInterrupt:
        return _interrupted(args, held.get("lease", "(none)"))


async def _agent_ws_main(args: argparse.Namespace, held: dict[str, str]) -> int:
    from .client import AsyncAgentClient, ServerError, TransportError

    try:
        async with AsyncAgentClient.open(args.url, timeout=10.0, transport="ws") as client:
            view = await client.get_run(args.run)
            agent = await client.claim(args.run, args.agent, lease=args.lease)
            held["lease"] = agent.lease
            print(_claimed_line(args, view, agent), flush=True)
            async with agent:
                try:
                    briefing = await agent.briefing()
                    policy = make_policy(args.policy, view.scenario, args.agent, briefing, view.seed)
                    async for obs in agent.observations(wait=args.wait):
                        print(f"\n--- {obs.observation_id} ---\n{obs.text}")
                        command = policy.decide(obs)
                        receipt = await agent.submit(obs, command)
                        print(f">>> {_show_command(command)}  [{_show_receipt(receipt)}]", flush=True)
                except KeyboardInterrupt:
                    agent.detach()
                    raise
            status = agent.run_status or (await client.get_run(args.run)).status
    except (ServerError, TransportError) as exc:
        print(f"warren agent: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return _ended(args, status)


# --------------------------------------------------------------------------------------------- warren demo


def condense(obs: Any) -> list[str]:
    """An observation in a few lines: time, id, why, where, what is carried, and what happened since."""
    o = obs.observation
    you, place = o["you"], o["place"]
    carry = ", ".join(i["id"] for i in you.get("inventory", [])) or "nothing"
    where = place.get("name") or place.get("cell")
    busy = "; busy " + ", ".join(b["action"] for b in o["busy"]) if o.get("busy") else ""
    lines = [f"[t={obs.sim_time_ms / 1000:g}s] {obs.observation_id} ({obs.reason}) at {where}, carrying {carry}{busy}"]
    # Event and message lines of the text start with their own time stamp, after the first line.
    lines += [f"    | {line}" for line in obs.text.splitlines()[1:] if line.startswith("[t=")]
    return lines


async def demo_main(seed: int, full_text: bool, out: Any) -> int:
    import httpx
    import trio

    from .client import AsyncAgentClient
    from .http.server import start_server
    from .runtime.clock import wall_seconds
    from .runtime.manager import ServerConfig

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    with tempfile.TemporaryDirectory(prefix="warren-demo-") as data_dir:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(start_server, ServerConfig(data_dir=Path(data_dir)), "127.0.0.1", 0)
            try:
                say(f"WARREN demo: warren-agent/0 served at {server.url} (journals in {data_dir})")
                async with httpx.AsyncClient(base_url=server.url, timeout=10.0) as http:
                    client = AsyncAgentClient(http)
                    with trio.fail_after(120):
                        status = await _demo_run(client, seed, full_text, say, wall_seconds)
            finally:
                server.shutdown()
    return EXIT_OK if status == "completed" else EXIT_FAILED


async def _demo_run(client: Any, seed: int, full_text: bool, say: Any, wall_seconds: Any) -> str:
    started = wall_seconds()
    run = await client.create_run("bridge_repair", seed, controlled_agents=["engineer-1"], npc_policy="solution")
    others = ", ".join(a.agent_id for a in run.agents if not a.controlled)
    say(f"created {run.run_id}: bridge_repair seed {seed}; engineer-1 is remote (this client over HTTP), "
        f"{others} run the scenario's solution policy inside the server")
    decisions = 0
    async with client.claim(run.run_id, "engineer-1") as agent:
        briefing = await agent.briefing()
        say(f"claimed engineer-1 (lease {agent.lease[:10]}...); briefing revision {briefing['revision']}, "
            f"{briefing['content_hash'][:19]}... verified: {briefing['name']}, {briefing['role']}")
        say(f"premise: {briefing['premise']}")
        for o in briefing["objectives"]:
            say(f"  objective {o['id']}: {o['description']} (0/{o['progress']['target']})")
        policy = make_policy("solution", run.scenario, "engineer-1", briefing, seed)
        say()
        async for obs in agent.observations():
            if full_text:
                say(obs.text)
            else:
                for line in condense(obs):
                    say(line)
            command = policy.decide(obs)
            receipt = await agent.submit(obs, command)
            decisions += 1
            say(f"    -> {_show_command(command):<60} {_show_receipt(receipt)}")
    final = await client.get_run(run.run_id)
    wall = wall_seconds() - started
    result = final.result or {}
    say()
    say(f"{final.run_id} {final.status}: {result.get('reason', '')}")
    for o in final.objectives:
        p = o["progress"]
        say(f"  objective {o['id']:<10} {o['status']:<10} {p['current']}/{p['target']}")
    say(f"  sim time {final.sim_time_ms / 1000:.1f}s, {result.get('decisions', '?')} decisions "
        f"({decisions} by engineer-1 over HTTP), wall {wall:.2f}s")
    return final.status


def cmd_demo(args: argparse.Namespace) -> int:
    import trio

    return trio.run(demo_main, args.seed, args.full_text, sys.stdout)


# --------------------------------------------------------------------------------------------- conformance


def cmd_conformance(args: argparse.Namespace) -> int:
    import httpx
    import trio

    from .conformance import format_report, run_conformance

    try:
        results = trio.run(lambda: run_conformance(args.url, scenario=args.scenario))
    except (httpx.HTTPError, trio.TooSlowError) as exc:
        print(f"warren conformance: cannot check {args.url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(format_report(args.url, results))
    return EXIT_OK if all(r.passed is not False for r in results) else EXIT_FAILED
