"""``warren mcp``: one remote WARREN agent as a stdio MCP server, for any MCP host.

Why this shape: an MCP host (a desktop assistant, a coding agent, an agent framework) already knows how to
show tools to its model and call them. So each tool of the agent's catalog becomes an MCP tool with the
briefing's input schema, ``observe`` long-polls for the next observation (its ``text`` for the model, the
envelope's parts as structured content), ``sleep``/``noop`` are the protocol's other commands, ``receipt``
reads a command's current outcome, and the briefing is a resource. A command tool submits against the
newest observation (observing first when none is outstanding) and returns the receipt: verdicts are
ordinary results, because a ``rejected`` with its reason is exactly what the model needs to see. The
statuses that mean this session cannot go on as it is (401/403: the lease; 410: the run ended) are tool
errors carrying the server's teaching detail and what to do.

Uses only the SDK (:mod:`warren_sim.client`), so it works against any warren-agent/0 server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from ..client import (
    AsyncAgent,
    AsyncAgentClient,
    Conflict,
    Observation,
    Receipt,
    RunEnded,
    ServerError,
    TransportError,
)
from ..client import LeaseError as ClientLeaseError

OBSERVE, SLEEP, NOOP, RECEIPT = "observe", "sleep", "noop", "receipt"
RESERVED = (OBSERVE, SLEEP, NOOP, RECEIPT)
DEFAULT_WAIT_S = 25.0
MAX_WAIT_S = 60.0

SUBMIT_NOTE = (" Submits against your newest observation (observing first when none is outstanding) and "
               "returns the server's verdict; call observe next to see what happened.")


class StartError(Exception):
    """The session cannot start (server unreachable, unknown run, agent held by someone else...)."""


@attrs.define
class Session:
    """The one agent this MCP server plays: its client, lease, briefing and newest observation."""

    client: AsyncAgentClient
    agent: AsyncAgent
    briefing: dict[str, Any]
    current: Observation | None = None
    answered: bool = False
    last_command_id: str | None = None

    @property
    def uri(self) -> str:
        return f"warren://runs/{self.agent.run_id}/agents/{self.agent.agent_id}/briefing"

    async def aclose(self) -> None:
        """Release the agent (so another client may claim it at once) and close the connection."""
        try:
            await self.agent.release()
        except (ServerError, TransportError):
            pass  # the run may have ended, or the server gone: the lease expires by itself
        await self.client.aclose()

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[dict[str, Any]]:
        """``{name, description, input_schema}`` for every MCP tool, catalog tools in the briefing's order."""
        out = [{
            "name": OBSERVE,
            "description": "Wait for your next observation (long-poll up to `wait` seconds) and return what you "
                           "perceive: its text, plus the envelope's parts (observation, affordances, deadline) "
                           "as structured content. Call it first, and after every command.",
            "input_schema": {"type": "object", "properties": {"wait": {
                "type": "number", "minimum": 0, "maximum": MAX_WAIT_S,
                "description": f"seconds to wait for a new observation (default {DEFAULT_WAIT_S:g})"}},
                "additionalProperties": False},
        }]
        for tool in self.briefing.get("tool_catalog") or []:
            kind = f"{tool.get('lane', 'body')} lane, {'durative' if tool.get('durative') else 'instant'}"
            out.append({"name": tool["name"], "description": f"{tool.get('description', '')} ({kind}.)"
                        + SUBMIT_NOTE, "input_schema": tool["input_schema"]})
        out.append({"name": SLEEP, "description": "Do nothing until sleep_ms of sim time have passed or something "
                    "wakes you." + SUBMIT_NOTE, "input_schema": {
                        "type": "object", "properties": {"sleep_ms": {"type": "integer", "minimum": 0}},
                        "required": ["sleep_ms"], "additionalProperties": False}})
        out.append({"name": NOOP, "description": "Do nothing this time (an action under way goes on)." + SUBMIT_NOTE,
                    "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}})
        out.append({"name": RECEIPT, "description": "The current receipt of a command you sent (default: the "
                    "latest): its verdict and its outcome (pending, accepted, rejected, completed, interrupted).",
                    "input_schema": {"type": "object", "properties": {"command_id": {"type": "string"}},
                                     "additionalProperties": False}})
        return out

    async def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, Any, bool]:
        """Run one tool: ``(text, structured content, is_error)``."""
        try:
            if name == OBSERVE:
                return await self._observe(arguments)
            if name == RECEIPT:
                return await self._receipt(arguments)
            if name == SLEEP:
                return await self._submit({"sleep_ms": arguments.get("sleep_ms")})
            if name == NOOP:
                return await self._submit({"noop": True})
            if any(t["name"] == name for t in self.briefing.get("tool_catalog") or []):
                return await self._submit({"action": name, "args": dict(arguments)})
            names = ", ".join(t["name"] for t in self.tools())
            return f"unknown tool {name!r}; the tools are: {names}", None, True
        except RunEnded as exc:
            status = exc.status or "ended"
            return (f"run {self.agent.run_id} has ended ({status}): {exc.detail} Nothing more can be done in it; "
                    "start warren mcp on a new run (for example with --create SCENARIO).",
                    {"run_status": status}, True)
        except ClientLeaseError as exc:
            return (f"the lease for {self.agent.agent_id} is no longer valid ({exc.status_code}): {exc.detail} "
                    "Restart warren mcp to claim the agent again (or pass --lease with a live token).", None, True)
        except Conflict as exc:  # the SDK claimed again after a 403 and another lease holds the agent now
            return (f"the lease for {self.agent.agent_id} is no longer valid and claiming it again was refused "
                    f"({exc.status_code}): {exc.detail} Restart warren mcp to claim the agent once that lease is "
                    "released (or pass --lease with a live token).", None, True)
        except (ServerError, TransportError) as exc:
            return f"the WARREN server refused or failed the request: {exc}", None, True

    async def _observe(self, arguments: Mapping[str, Any]) -> tuple[str, Any, bool]:
        try:
            wait = max(0.0, min(float(arguments.get("wait", DEFAULT_WAIT_S)), MAX_WAIT_S))
        except (TypeError, ValueError):
            return (f"wait must be a number of seconds between 0 and {MAX_WAIT_S:g}, got "
                    f"{arguments.get('wait')!r}", None, True)
        outstanding = self.current is not None and not self.answered
        # An unanswered observation is still the one to answer: hand it back at once unless a newer one
        # superseded it (a zero-wait poll), instead of long-polling for a world that waits on this agent.
        obs = await self.agent.poll(wait=0.0 if outstanding else wait)
        if obs is None:
            if outstanding:
                assert self.current is not None
                return (f"(still outstanding, not yet answered: {self.current.observation_id})\n\n"
                        f"{self.current.text}", envelope_parts(self.current), False)
            return f"no new observation within {wait:g}s; call observe again", None, False
        self.current, self.answered = obs, False
        return obs.text, envelope_parts(obs), False

    async def _submit(self, command: dict[str, Any]) -> tuple[str, Any, bool]:
        if self.current is None or self.answered:
            obs = await self.agent.poll(wait=DEFAULT_WAIT_S)
            if obs is None:
                return (f"there is no observation to answer yet (none arrived within {DEFAULT_WAIT_S:g}s); "
                        "call observe and try again", None, False)
            self.current, self.answered = obs, False
        assert self.current is not None
        receipt = await self.agent.submit(self.current, command)
        self.last_command_id = receipt.command_id
        if receipt.status in ("accepted", "duplicate"):
            self.answered = True
        elif receipt.status in ("stale", "expired"):
            self.current = None  # superseded or too late: the next command observes first
        return receipt_text(receipt, self.current), receipt_parts(receipt), False

    async def _receipt(self, arguments: Mapping[str, Any]) -> tuple[str, Any, bool]:
        command_id = arguments.get("command_id") or self.last_command_id
        if not command_id:
            return "no command sent yet; there is no receipt to show", None, False
        receipt = await self.agent.receipt(str(command_id))
        return receipt_text(receipt, None), receipt_parts(receipt), False


def envelope_parts(obs: Observation) -> dict[str, Any]:
    return {"observation_id": obs.observation_id, "seq": obs.seq, "sim_time_ms": obs.sim_time_ms,
            "reason": obs.reason, "deadline_unix": obs.deadline_unix, "observation": obs.observation,
            "affordances": obs.affordances}


def receipt_parts(receipt: Receipt) -> dict[str, Any]:
    return {"command_id": receipt.command_id, "observation_id": receipt.observation_id, "status": receipt.status,
            "detail": receipt.detail, "outcome": receipt.outcome, "outcome_reason": receipt.outcome_reason,
            "conflict": _plain(getattr(receipt, "conflict", None))}


def _plain(value: Any) -> Any:
    """An attrs model (the receipt's conflict) as plain JSON data for structured content."""
    return attrs.asdict(value) if attrs.has(type(value)) else value


def receipt_text(receipt: Receipt, current: Observation | None) -> str:
    text = f"{receipt.status}"
    if receipt.detail:
        text += f": {receipt.detail}"
    if receipt.outcome and receipt.outcome != "none":
        text += f" (outcome {receipt.outcome}{': ' + receipt.outcome_reason if receipt.outcome_reason else ''})"
    text += f" [command {receipt.command_id} for {receipt.observation_id}]"
    if receipt.status in ("accepted", "duplicate"):
        text += ". Call observe to see what happens next."
    elif receipt.status == "rejected" and current is not None:
        text += f". {current.observation_id} is still yours to answer: send another command."
    elif receipt.status in ("stale", "expired"):
        text += ". Call observe for your newest observation."
    return text


def instructions(briefing: Mapping[str, Any]) -> str:
    return (f"You play {briefing.get('name')} ({briefing.get('agent_id')}, role {briefing.get('role')}) in the "
            f"WARREN scenario {briefing.get('scenario')!r}: {briefing.get('premise', '')} Loop: call observe, "
            "read the text, then call exactly one command tool (an action, sleep or noop); each returns the "
            "server's verdict. The briefing resource has your objectives, tools and the map.")


async def open_session(url: str, run_id: str | None, agent_id: str, lease: str | None = None,
                       create: str | None = None, seed: int = 0) -> Session:
    """Connect, create the run when asked, claim the agent and fetch its briefing; :class:`StartError` if not."""
    client = AsyncAgentClient.open(url, timeout=max(DEFAULT_WAIT_S, MAX_WAIT_S) + 15.0)
    try:
        if create is not None:
            run = await client.create_run(create, seed, controlled_agents=[agent_id], npc_policy="solution")
            run_id = run.run_id
        assert run_id is not None
        agent = await client.claim(run_id, agent_id, lease=lease)
        briefing = await agent.briefing()
    except (ServerError, TransportError) as exc:
        await client.aclose()
        raise StartError(f"cannot start on {url}: {exc}") from None
    clash = [t["name"] for t in briefing.get("tool_catalog") or [] if t["name"] in RESERVED]
    if clash:
        await client.aclose()
        raise StartError(f"the agent's tool catalog has tools named {clash}, which warren mcp reserves")
    return Session(client=client, agent=agent, briefing=briefing)


def build_server(session: Session) -> Any:
    """The low-level MCP ``Server`` with explicit input schemas for every tool."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])
            for t in session.tools()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        text, structured, is_error = await session.call(params.name, params.arguments or {})
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured,
                                    is_error=is_error)

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(resources=[types.Resource(
            uri=session.uri, name="briefing", mime_type="application/json",
            description=f"The briefing of {session.agent.agent_id}: premise, role, objectives, tools, map")])

    async def read_resource(ctx: Any, params: Any) -> Any:
        if str(params.uri) != session.uri:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=-32602, message=f"unknown resource {params.uri}; the one resource is {session.uri}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=session.uri, mime_type="application/json",
            text=json.dumps(session.briefing, indent=2, ensure_ascii=False))])

    return Server("warren", version=_version(), instructions=instructions(session.briefing),
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_read_resource=read_resource)


def _version() -> str:
    from .. import __version__

    return __version__


async def serve_stdio(session: Session) -> None:
    """Serve MCP on this process's stdin/stdout until the host closes them; then release the agent."""
    from mcp.server.stdio import stdio_server

    server = build_server(session)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await session.aclose()
