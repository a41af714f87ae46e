"""The Python SDK of warren-agent/0: drive remote agents of any warren-agent/0 server.

Three clients with the same API: on trio over HTTP, blocking over HTTP, and on trio over the WebSocket binding.
The HTTP ones take an httpx client, so the same code talks to a real server or to an app in-process
(``httpx.ASGITransport``); :func:`open` makes the one a transport asks for, with its own httpx client::

    async with httpx.AsyncClient(base_url="http://127.0.0.1:8000") as http:
        client = AsyncAgentClient(http)
        run = await client.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:     # released on exit
            briefing = await agent.briefing()                            # cached, hash-checked
            async for obs in agent.observations():                       # ends when the run ends
                receipt = await agent.submit(obs, {"action": "take", "args": {"item": "toolbox-1"}})
        print(agent.run_status)                                          # "completed", ...

    with open("http://127.0.0.1:8000", blocking=True) as client:         # AgentClient: same names, no await
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
``open(url, transport="ws")`` (an :class:`AsyncWsAgentClient`), used as ``async with``; one connection carries
every claimed agent, envelopes are pushed, and a dropped connection is reconnected with each lease claimed
again. There is no blocking WebSocket client.

How it is built: every operation is written once, sans I/O, in :mod:`warren_sim.client._core` (a generator
that yields the requests and pauses it needs); :mod:`._async`, :mod:`._sync` and :mod:`._ws` are its three
drivers (trio over HTTP, blocking over HTTP, trio over the WebSocket, whose connection is
:mod:`._ws_connection`), and this module's :func:`open` picks one.

The SDK imports only :mod:`warren_sim.protocol` from WARREN (an import-linter contract checks it).
"""

from typing import Any, Literal, overload

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
    ServiceUnavailable,
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
    "ServiceUnavailable",
    "TooManyRequests",
    "TransportError",
    "UnprocessableCommand",
    "WaitTimeout",
    "WarrenError",
    "briefing_hash",
    "mint_command_id",
    "open",
    "succeeded",
    "ws_url",
]


def succeeded(receipt: Receipt) -> bool:
    """True when the server holds the command as accepted: ``accepted``, or ``duplicate`` (accepted before)."""
    return receipt.status in SUCCESS_STATUSES


@overload
def open(url: str, *, transport: Literal["http"] = "http", blocking: Literal[True], timeout: float = 10.0,
         retry: RetryPolicy | None = None, **httpx_kwargs: Any) -> AgentClient: ...
@overload
def open(url: str, *, transport: Literal["http"] = "http", blocking: Literal[False] = False,
         timeout: float = 10.0, retry: RetryPolicy | None = None, **httpx_kwargs: Any) -> AsyncAgentClient: ...
@overload
def open(url: str, *, transport: Literal["ws"], blocking: Literal[False] = False, timeout: float = 10.0,
         retry: RetryPolicy | None = None, **httpx_kwargs: Any) -> AsyncWsAgentClient: ...
def open(url: str, *, transport: str = "http", blocking: bool = False, timeout: float = 10.0,
         retry: RetryPolicy | None = None, **httpx_kwargs: Any) -> AgentClient | AsyncAgentClient:
    """A client for the server at ``url`` with its own httpx client (closed with it; use it as ``with`` or
    ``async with``): the one driver that ``transport`` and ``blocking`` ask for.

    ``transport="http"`` (the canonical binding, long-polling): :class:`AsyncAgentClient`, or :class:`AgentClient`
    with ``blocking=True``. ``transport="ws"``: :class:`AsyncWsAgentClient`, its agents driven over
    ``WS /v1/agent`` (trio only). ``timeout`` is httpx's (and, over the WebSocket, how long a request's answer may
    take); ``retry`` says how transport errors are retried where that is safe."""
    if transport not in ("http", "ws"):
        raise ValueError(f"transport is 'http' (long-polling, canonical) or 'ws' (WS /v1/agent), not {transport!r}")
    if blocking:
        if transport == "ws":
            raise ValueError("there is no blocking WebSocket client: use transport='http' with blocking=True, or "
                             "the trio client (blocking=False) with transport='ws'")
        return AgentClient.open(url, timeout=timeout, retry=retry, **httpx_kwargs)
    cls = AsyncWsAgentClient if transport == "ws" else AsyncAgentClient
    return cls.open(url, timeout=timeout, retry=retry, **httpx_kwargs)
