"""``warren demo``: the whole protocol in one process, live.

A real server on a free loopback port, a ``bridge_repair`` run (seed 3) whose ``engineer-1`` is driven over
HTTP by the trio SDK with the scenario's own solution policy, a condensed live transcript, and the run's
summary.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_scenarios_option,
    apply_scenarios_option,
    remote_factory,
    remote_policy,
    show_command,
    show_receipt,
    subparser,
)


def register(sub: Any) -> None:
    p = subparser(sub, "demo", help="serve, create a bridge_repair run and drive engineer-1 over HTTP, live")
    p.add_argument("--seed", type=int, default=3, help="the run's seed")
    p.add_argument("--full-text", action="store_true", help="print each observation's full text")
    add_scenarios_option(p)
    p.set_defaults(func=cmd_demo)


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

    from ..client import AsyncAgentClient
    from ..http.server import start_server
    from ..runtime.clock import wall_seconds
    from ..runtime.manager import ServerConfig

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
        policy = remote_policy(remote_factory("solution", run.scenario, seed), "engineer-1", briefing)
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
            say(f"    -> {show_command(command):<60} {show_receipt(receipt)}")
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

    apply_scenarios_option(args)
    return trio.run(demo_main, args.seed, args.full_text, sys.stdout)
