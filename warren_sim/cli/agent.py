"""``warren agent``: drive one remote agent of a served run with a policy, from the command line.

``warren agent URL --run RUN --agent AGENT`` drives one remote agent of a served run with a policy through
the blocking SDK (printing each observation's text and the command it chose) until the run ends, then
prints how it ended and why; ``--create SCENARIO [--seed N]`` creates the run first (AGENT remote, the
others on the scenario's solution policy). With ``--transport ws`` it uses the trio SDK over the
WebSocket binding instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    GIVE_UP_NOOP,
    RETRIES_AFTER_REJECTION,
    UsageError,
    add_llm_options,
    add_scenarios_option,
    after_receipt,
    answers_again,
    apply_llm_options,
    apply_scenarios_option,
    gave_up,
    remote_command,
    remote_factory,
    remote_policy,
    show_command,
    show_receipt,
    subparser,
)


def register(sub: Any) -> None:
    p = subparser(sub, "agent", help="drive one remote agent of a served run with a policy",
                  description="Claim AGENT of a served run and drive it with a policy until the run ends.")
    p.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--run", help="the run id, e.g. run-1 (or --create a run)")
    p.add_argument("--create", metavar="SCENARIO",
                   help="create a run of SCENARIO first: AGENT is remote, every other agent runs the scenario's "
                        "solution policy inside the server")
    p.add_argument("--seed", type=int, default=0, help="the seed of the run --create makes")
    p.add_argument("--agent", required=True, help="a controlled agent of the run")
    p.add_argument("--policy", default="solution",
                   help="solution (the scenario's), random, none, llm or module:factory (docs/policies.md)")
    p.add_argument("--lease", help="resume a lease you hold (the token printed when it was claimed)")
    p.add_argument("--wait", type=float, default=25.0, help="long-poll wait per request, seconds; "
                   "over ws, how often an idle agent refreshes its lease")
    p.add_argument("--transport", choices=("http", "ws"), default="http",
                   help="http: long-polling (canonical); ws: the WebSocket binding WS /v1/agent")
    p.add_argument("--receipts", type=Path, metavar="FILE",
                   help="append every receipt (command_id, observation_id, status) to FILE as JSON Lines")
    p.add_argument("--reconnect", type=float, default=60.0, metavar="S",
                   help="how long to keep retrying when the server cannot be reached (a restart) before giving up")
    add_scenarios_option(p)
    add_llm_options(p)
    p.set_defaults(func=cmd_agent)


def _claimed_line(args: argparse.Namespace, view: Any, agent: Any) -> str:
    how = "resumed" if agent.resumed else "claimed"
    over = " over WebSocket" if args.transport == "ws" else ""
    return (f"{how} {args.agent} of {args.run} ({view.scenario} seed {view.seed}){over}; lease {agent.lease} "
            "(resume with --lease)")


def _interrupted(args: argparse.Namespace, lease: str) -> int:
    print(f"\ninterrupted; {args.agent} stays claimed until its lease expires: resume with --lease {lease}",
          file=sys.stderr)
    return 130


def _ended(args: argparse.Namespace, view: Any) -> int:
    """``run-2 ended: failed (the deadline passed with bridge at 2/3)``: the status and the run view's reason."""
    result = view.result or {}
    reason = result.get("reason") or view.error
    print(f"\n{args.run} ended: {view.status}" + (f" ({reason})" if reason else ""))
    if view.faults:  # a run served with faults (docs/faults.md): what its agents met, by kind
        print("faults met: " + ", ".join(f"{kind} {n}" for kind, n in view.faults.items()))
    return EXIT_OK if view.status == "completed" else EXIT_FAILED


def _check_args(args: argparse.Namespace) -> None:
    apply_scenarios_option(args)
    if (args.run is None) == (args.create is None):
        raise UsageError("name the run to join with --run RUN, or create one with --create SCENARIO [--seed N]"
                         if args.run is None else "--run and --create exclude each other: join a run or create one")
    if args.create is not None and args.lease is not None:
        raise UsageError("--lease resumes an agent of an existing run; with --create the run is new")
    apply_llm_options(args)


def _create_line(view: Any, agent: str) -> str:
    return (f"created {view.run_id}: {view.scenario} seed {view.seed}; {agent} is remote (this client), the other "
            "agents run the scenario's solution policy in the server")


def cmd_agent(args: argparse.Namespace) -> int:
    _check_args(args)
    if getattr(args, "transport", "http") == "ws":
        return _agent_over_ws(args)
    from ..client import AgentClient, RetryPolicy, RunEnded, ServerError, TransportError

    log = _ReceiptLog(args.receipts)
    with AgentClient.open(args.url, timeout=10.0, retry=RetryPolicy(reconnect_s=args.reconnect)) as client:
        try:
            if args.create is not None:
                factory = remote_factory(args.policy, args.create, args.seed)
                view = client.create_run(args.create, args.seed, controlled_agents=[args.agent])
                args.run = view.run_id
                print(_create_line(view, args.agent), flush=True)
            else:
                view = client.get_run(args.run)
                factory = remote_factory(args.policy, view.scenario, view.seed)
            agent = client.claim(args.run, args.agent, lease=args.lease)
        except (ServerError, TransportError) as exc:
            print(f"warren agent: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(_claimed_line(args, view, agent), flush=True)
        try:
            with agent:
                try:
                    briefing = agent.briefing()
                    policy = brought_to_fork(args, view, factory, remote_policy(factory, args.agent, briefing))
                    for obs in agent.observations(wait=args.wait):
                        print(f"\n--- {obs.observation_id} ---\n{obs.text}")
                        for attempt in range(RETRIES_AFTER_REJECTION + 1):
                            command, invalid = remote_command(policy.decide(obs))
                            if invalid is not None:
                                print(f"(invalid: {invalid}; sending a noop)")
                            receipt = agent.submit(obs, command)
                            log.write(receipt)
                            extra = after_receipt(policy, receipt)
                            print(f">>> {show_command(command)}  [{show_receipt(receipt)}]{extra}", flush=True)
                            if not answers_again(policy, receipt, attempt):
                                break
                        if gave_up(receipt):
                            receipt = agent.submit(obs, GIVE_UP_NOOP)
                            log.write(receipt)
                            print(f">>> noop (the policy's answers were rejected)  [{show_receipt(receipt)}]",
                                  flush=True)
                except RunEnded:  # a command (or its claim again after a 403) met the run's end: the view says how
                    pass
                except KeyboardInterrupt:
                    agent.detach()  # before leaving `with`, which would release the agent otherwise
                    raise
        except KeyboardInterrupt:
            return _interrupted(args, agent.lease)
        except (ServerError, TransportError) as exc:
            print(f"warren agent: {exc}", file=sys.stderr)
            return EXIT_FAILED
        final = client.get_run(args.run)
    return _ended(args, final)


def brought_to_fork(args: argparse.Namespace, view: Any, factory: Any, policy: Any) -> Any:
    """The agent's policy brought to the fork point when the run is a fork (docs/fork.md, "Served"), else
    ``policy``: shown the fork's journal up to where it stands, it goes on as if it had been there all along
    (a fork continued with the parent's policies is its parent). A policy that cannot be brought is a usage
    error that says why."""
    if view.forked_from is None:
        return policy
    import httpx

    from ..fork import ForkError, brought_policy

    url = f"{args.url.rstrip('/')}/v1/runs/{args.run}/journal"
    try:
        reply = httpx.get(url, timeout=60.0)
        reply.raise_for_status()
    except httpx.HTTPError as exc:
        raise UsageError(f"{args.run} is a fork; its journal ({url}) could not be read to bring the policy to "
                         f"the fork point: {exc}") from None
    records = [json.loads(line) for line in reply.text.splitlines() if line.strip()]
    try:
        return brought_policy(records, args.agent, factory, where=f"the journal of {args.run}")
    except ForkError as exc:
        raise UsageError(f"{args.agent}'s policy cannot join the fork {args.run}: {exc}") from None


class _ReceiptLog:
    """``--receipts FILE``: each receipt as one JSON line, flushed at once (what the kill test checks)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, receipt: Any) -> None:
        if self.path is None:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"command_id": receipt.command_id, "observation_id": receipt.observation_id,
                                "status": receipt.status}) + "\n")


def _agent_over_ws(args: argparse.Namespace) -> int:
    """``warren agent --transport ws``: the same loop on the trio SDK over ``WS /v1/agent`` (runs over HTTP)."""
    import trio

    held: dict[str, str] = {}  # the lease, for the Ctrl-C message
    try:
        return trio.run(_agent_ws_main, args, held)
    except KeyboardInterrupt:
        return _interrupted(args, held.get("lease", "(none)"))


async def _agent_ws_main(args: argparse.Namespace, held: dict[str, str]) -> int:
    import trio

    from ..client import RunEnded, ServerError, TransportError
    from ..client import open as open_client

    log = _ReceiptLog(args.receipts)
    try:
        async with open_client(args.url, transport="ws", timeout=10.0) as client:
            if args.create is not None:
                factory = remote_factory(args.policy, args.create, args.seed)
                view = await client.create_run(args.create, args.seed, controlled_agents=[args.agent])
                args.run = view.run_id
                print(_create_line(view, args.agent), flush=True)
            else:
                view = await client.get_run(args.run)
                factory = remote_factory(args.policy, view.scenario, view.seed)
            agent = await client.claim(args.run, args.agent, lease=args.lease)
            held["lease"] = agent.lease
            print(_claimed_line(args, view, agent), flush=True)
            async with agent:
                try:
                    briefing = await agent.briefing()
                    policy = await trio.to_thread.run_sync(
                        brought_to_fork, args, view, factory, remote_policy(factory, args.agent, briefing))
                    async for obs in agent.observations(wait=args.wait):
                        print(f"\n--- {obs.observation_id} ---\n{obs.text}")
                        for attempt in range(RETRIES_AFTER_REJECTION + 1):
                            command, invalid = remote_command(policy.decide(obs))
                            if invalid is not None:
                                print(f"(invalid: {invalid}; sending a noop)")
                            receipt = await agent.submit(obs, command)
                            log.write(receipt)
                            extra = after_receipt(policy, receipt)
                            print(f">>> {show_command(command)}  [{show_receipt(receipt)}]{extra}", flush=True)
                            if not answers_again(policy, receipt, attempt):
                                break
                        if gave_up(receipt):
                            receipt = await agent.submit(obs, GIVE_UP_NOOP)
                            log.write(receipt)
                            print(f">>> noop (the policy's answers were rejected)  [{show_receipt(receipt)}]",
                                  flush=True)
                except RunEnded:  # as over HTTP
                    pass
                except KeyboardInterrupt:
                    agent.detach()
                    raise
            final = await client.get_run(args.run)
    except (ServerError, TransportError) as exc:
        print(f"warren agent: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return _ended(args, final)
