"""``warren mcp URL (--run RUN | --create SCENARIO [--seed N]) --agent AGENT [--lease TOKEN]``: one remote agent
as a stdio MCP server for an MCP host (:mod:`warren_sim.mcp`, optional extra ``warren-sim[mcp]``).

stdout carries MCP; everything this command says goes to stderr. Exit 0 when the host closes the session,
2 when it cannot start (bad arguments, server unreachable, unknown run, agent held by another lease).
"""

from __future__ import annotations

import argparse
from typing import Any

from ._common import UsageError, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "mcp", help="serve one remote agent of a run as a stdio MCP server (for MCP hosts)",
                  description="Claim AGENT of a served run (or --create one) and serve it over MCP on stdio: "
                              "tools observe, one per tool of the agent, sleep, noop, receipt; the briefing as "
                              "a resource. See docs/llm.md.")
    p.add_argument("url", help="the WARREN server, e.g. http://127.0.0.1:8000")
    p.add_argument("--run", help="the run to join, e.g. run-1 (or --create one)")
    p.add_argument("--create", metavar="SCENARIO",
                   help="create a run of SCENARIO: AGENT is remote (the MCP host), the others run the scenario's "
                        "solution policy in the server")
    p.add_argument("--seed", type=int, default=0, help="the seed of the run --create makes")
    p.add_argument("--agent", required=True, help="the controlled agent to play")
    p.add_argument("--lease", help="resume a lease you hold (printed on stderr when it was claimed)")
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    if (args.run is None) == (args.create is None):
        raise UsageError("name the run with --run RUN or --create SCENARIO [--seed N] (one of them)")
    if args.create is not None and args.lease is not None:
        raise UsageError("--lease resumes an agent of an existing run; with --create the run is new")
    from ..mcp import run_mcp

    return run_mcp(args.url, args.run, args.agent, lease=args.lease, create=args.create, seed=args.seed)
