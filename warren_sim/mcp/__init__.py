"""``warren mcp``: a stdio MCP server that lets any MCP host play one agent of a served WARREN run.

The official ``mcp`` SDK (optional extra ``warren-sim[mcp]``), its low-level ``Server`` with explicit input
schemas, run on trio through anyio; WARREN is reached only through the SDK (:mod:`warren_sim.client`).
See :mod:`warren_sim.mcp.server` and docs/llm.md.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["run_mcp"]


def run_mcp(url: str, run_id: str | None, agent_id: str, *, lease: str | None = None, create: str | None = None,
            seed: int = 0, log: TextIO = sys.stderr) -> int:
    """Claim the agent, then serve MCP on stdin/stdout until the host closes them. 0, or 2 if it cannot start.

    Only stderr is ours: stdout carries the MCP messages.
    """
    try:
        import anyio
        import mcp  # noqa: F401  (the SDK; checked here for a clear message)
    except ImportError:
        print("warren mcp needs the MCP SDK: pip install 'warren-sim[mcp]'", file=log)
        return 2
    from .server import StartError, open_session, serve_stdio

    async def main() -> int:
        try:
            session = await open_session(url, run_id, agent_id, lease=lease, create=create, seed=seed)
        except StartError as exc:
            print(f"warren mcp: {exc}", file=log, flush=True)
            return 2
        how = "resumed" if session.agent.resumed else "claimed"
        print(f"warren mcp: {how} {agent_id} of {session.agent.run_id} on {url}; lease {session.agent.lease} "
              "(resume with --lease); serving MCP on stdio", file=log, flush=True)
        await serve_stdio(session)
        return 0

    return int(anyio.run(main, backend="trio"))
