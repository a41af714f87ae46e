"""The Python SDK of warren-agent/0: drive remote agents of any warren-agent/0 server.

Two clients with the same API, one on trio and one blocking; both take an httpx client, so the same code
talks to a real server or to an app in-process (``httpx.ASGITransport``)::

    async with httpx.AsyncClient(base_url="http://127.0.0.1:8000") as http:
        client = AsyncAgentClient(http)
        run = await client.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:     # released on exit
            briefing = await agent.briefing()                            # cached, hash-checked
            async for obs in agent.observations():                       # ends when the run ends
                receipt = await agent.submit(obs, {"action": "take", "args": {"item": "toolbox-1"}})
        print(agent.run_status)                                          # "completed", ...

    with AgentClient.open("http://127.0.0.1:8000") as client:            # blocking: same names, no await
        with client.claim("run-1", "engineer-1", lease=saved_token) as agent:
            ...

What the SDK guarantees, per the protocol (details in :mod:`warren_sim.client._core`):

* ``submit`` mints a command id (``c-<uuid4 hex>``) and retries transport errors under that same id; a
  retried command that had been accepted comes back ``duplicate`` carrying the original receipt, which
  counts as success (:data:`SUCCESS_STATUSES`): one acceptance, never two.
* Observations are long-polled with ``after=<seq>``; 204s are polled again; redelivered envelopes are
  dropped by seq, except after ``agent.resume()`` / ``agent.redeliver()`` (reconnect), which hands the
  outstanding envelope out again. ``claim(run, agent, lease=token)`` resumes a saved lease.
* Every response must carry ``X-Warren-Protocol: warren-agent/0`` and fit the protocol's models.
* Errors form one hierarchy, documented in :mod:`warren_sim.client._exceptions`: ``RunEnded`` (410, with
  the terminal ``status``), ``LeaseError``, ``Conflict`` ... under ``ServerError``; ``ProtocolError`` when
  the server breaks the protocol; ``TransportError`` when the network does.

Over the WebSocket binding (``WS /v1/agent``, JSON-RPC 2.0) the trio client has the same agent API:
``AsyncAgentClient.open(url, transport="ws")`` (or :class:`AsyncWsAgentClient`), used as ``async with``; one
connection carries every claimed agent, envelopes are pushed, and a dropped connection is reconnected with
each lease claimed again (:mod:`warren_sim.client._ws`, over :mod:`warren_sim.client._ws_connection`). There is no blocking WebSocket client.

The SDK imports only :mod:`warren_sim.protocol` from WARREN (an import-linter contract checks it).
"""

from warren_sim.protocol.models import Receipt, RunView

from ._async import AsyncAgent, AsyncAgentClient
from ._core import SUCCESS_STATUSES, RetryPolicy, briefing_hash, mint_command_id
from ._exceptions import (
    BadRequest,
    BriefingHashMismatch,
    Conflict,
    InternalServerError,
    LeaseError,
    LeaseRejected,
    LeaseRequired,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RunEnded,
    ServerError,
    TooManyRequests,
    TransportError,
    UnprocessableCommand,
    WaitTimeout,
    WarrenError,
)
from ._models import Observation
from ._sync import Agent, AgentClient
from ._ws import AsyncWsAgent, AsyncWsAgentClient, ws_url

__all__ = [
    "SUCCESS_STATUSES",
    "Agent",
    "AgentClient",
    "AsyncAgent",
    "AsyncAgentClient",
    "AsyncWsAgent",
    "AsyncWsAgentClient",
    "BadRequest",
    "BriefingHashMismatch",
    "Conflict",
    "InternalServerError",
    "LeaseError",
    "LeaseRejected",
    "LeaseRequired",
    "NotFound",
    "Observation",
    "PayloadTooLarge",
    "ProtocolError",
    "Receipt",
    "RetryPolicy",
    "RunEnded",
    "RunView",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "UnprocessableCommand",
    "WaitTimeout",
    "WarrenError",
    "briefing_hash",
    "mint_command_id",
    "succeeded",
    "ws_url",
]


def succeeded(receipt: Receipt) -> bool:
    """True when the server holds the command as accepted: ``accepted``, or ``duplicate`` (accepted before)."""
    return receipt.status in SUCCESS_STATUSES
