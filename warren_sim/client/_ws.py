"""The WebSocket transport of the trio SDK: :class:`AsyncWsAgentClient` drives agents over ``WS /v1/agent``.

Same API as :class:`~warren_sim.client.AsyncAgentClient` (runs are still created and inspected over HTTP: the
binding has no run methods), but each agent handle is served by one shared JSON-RPC 2.0 WebSocket instead of
long-polls (DESIGN section 3, "The agent WebSocket binding")::

    async with AsyncAgentClient.open("http://127.0.0.1:8000", transport="ws") as client:
        run = await client.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1", "courier-1"])
        async with client.claim(run.run_id, "engineer-1") as eng, client.claim(run.run_id, "courier-1") as cou:
            ...   # both leases on one connection; pushed envelopes are routed to their handle

This module is the agent API (claim, observe, submit); the connection under it (JSON-RPC framing, the reader
task, heartbeats, reconnects) is :mod:`._ws_connection`. How it behaves (the rules of :mod:`._core`, carried
over to a connection):

* ``async with`` is required: the connection lives in a nursery the client opens on entry (a background task
  reads frames, answers the server's heartbeat pings, routes pushes and reconnects).
* ``agent.claim`` subscribes the connection to the agent; the server pushes the outstanding envelope and every
  later one (``observation``/``observations`` notifications). Each handle keeps the newest pushed envelope with
  ``seq`` above the highest it handed out: ``next_observation()`` hands each seq out once.
* When the connection drops (or a request goes unanswered for ``timeout`` s, or the server falls silent for
  three heartbeat intervals) the client reconnects with the retry policy's backoff, sends ``initialize`` and
  claims every held agent again with its lease token; the server then redelivers each outstanding envelope
  (handed out only if not handed out before). Requests cut by the drop are sent again on the new connection
  where that cannot do harm: ``submit`` under the *same* command id (an acceptance whose answer was lost comes
  back ``duplicate``: success, one acceptance), reads, a resuming claim, release. A fresh claim is not.
* JSON-RPC errors whose code is an HTTP status raise the same exceptions as over HTTP (``RunEnded`` on 410,
  ``LeaseRejected`` on 403 ...); ``run.status`` notifications end the handle's observations with ``RunEnded``.
* ``next_observation(wait)``/``poll(wait)``: every ``wait`` s without an envelope the handle sends an
  ``agent.subscribe`` (an authenticated request: it keeps the lease alive, as a long-poll does over HTTP, and
  turns a run that ended unseen into ``RunEnded``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from warren_sim.protocol.models import Receipt

from . import _core as core
from ._async import AsyncAgent, AsyncAgentClient
from ._core import SUCCESS_STATUSES, RetryPolicy
from ._exceptions import (
    LeaseError,
    LeaseRejected,
    NotFound,
    ProtocolError,
    RunEnded,
    TransportError,
    WaitTimeout,
)
from ._models import Observation
from ._ws_connection import Connection, Held, apply_claim, ws_url

__all__ = ["AsyncWsAgent", "AsyncWsAgentClient", "ws_url"]

class AsyncWsAgentClient(AsyncAgentClient):
    """:class:`AsyncAgentClient` whose agents are driven over the WebSocket binding ``WS /v1/agent``.

    Runs, scenarios and discovery go over ``http`` (an ``httpx.AsyncClient`` on a real server: the WebSocket
    needs a socket, so ``httpx.ASGITransport`` will not do); every claimed agent shares one WebSocket, at
    ``url`` (default: derived from ``http.base_url``). Use it as ``async with``; ``timeout`` (default: the
    httpx read timeout) bounds each request's answer, after which the connection counts as lost.
    ``socket_wrapper`` wraps each new trio-websocket connection (an object with ``send_message``,
    ``get_message`` and ``aclose``): for tests and instrumentation. ``frames`` is what ``initialize`` asks for:
    ``"batched"`` (the default: what the server sends at once, a reply and the envelopes it set off, arrives in one
    frame) or ``"single"`` (one message per frame).
    """

    websocket = True

    def __init__(self, http: httpx.AsyncClient, *, retry: RetryPolicy | None = None, owns_http: bool = False,
                 url: str | None = None, timeout: float | None = None,
                 socket_wrapper: Callable[[Any], Any] | None = None, frames: str = "batched") -> None:
        super().__init__(http, retry=retry, owns_http=owns_http)
        self.frames = frames
        self.ws_url = url or ws_url(http.base_url)
        self._timeout = timeout or http.timeout.read or 10.0
        self.socket_wrapper = socket_wrapper
        self._conn: Connection | None = None
        self._lifetime: Any = None

    async def __aenter__(self) -> AsyncWsAgentClient:
        if self._lifetime is not None:
            raise RuntimeError("this AsyncWsAgentClient is already open")
        lifetime = self._live_connection()
        try:
            await lifetime.__aenter__()
        except BaseException:
            await super().aclose()
            raise
        self._lifetime = lifetime
        return self

    async def __aexit__(self, *exc: Any) -> None:
        lifetime, self._lifetime = self._lifetime, None
        try:
            if lifetime is not None:
                await lifetime.__aexit__(*exc)
        finally:
            await self.aclose()

    @asynccontextmanager
    async def _live_connection(self) -> AsyncIterator[None]:
        """The connection's tasks in a nursery for the duration of the ``async with`` block. An exception of the
        block propagates as itself (not wrapped in an exception group): it is held until the nursery, which
        only holds the connection's own tasks, has closed."""
        conn = Connection(self.ws_url, retry=self.retry, timeout=self._timeout, socket_wrapper=self.socket_wrapper,
                          frames=self.frames)
        error: BaseException | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.supervise)
            try:
                await conn.ready()
                self._conn = conn
                yield
            except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the nursery
                error = exc
            finally:
                with trio.CancelScope(shield=True):
                    await conn.close()
                nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    def _connection(self) -> Connection:
        if self._conn is None:
            raise RuntimeError("open the WebSocket client with `async with AsyncWsAgentClient(...)` (or "
                               "`async with AsyncAgentClient.open(url, transport='ws')`) before claiming agents")
        return self._conn

    @property
    def connections(self) -> int:
        """How many times the WebSocket connected (1, plus one per reconnect)."""
        return self._conn.connections if self._conn is not None else 0

    @property
    def pings_answered(self) -> int:
        """How many of the server's heartbeat pings this client answered."""
        return self._conn.pings_answered if self._conn is not None else 0

    async def ping(self) -> float:
        """A JSON-RPC ``ping``: the round trip in seconds (trio clock)."""
        started = trio.current_time()
        await self._connection().call("ping", lambda: {"origin_ns": int(started * 1e9)})
        return trio.current_time() - started

    async def _new_agent(self, run_id: str, agent_id: str, lease: str | None) -> AsyncWsAgent:
        conn = self._connection()
        key = (run_id, agent_id)
        params = {"run_id": run_id, "agent_id": agent_id, **({"lease": lease} if lease else {})}
        # A fresh claim whose answer is lost would leave the agent held by a token we never saw: not retried.
        retry = bool(lease)
        held = conn.held.get(key)
        if held is not None and held.claimed and not held.state.released:
            # This connection holds the agent already: one inbox per agent, shared by its handles (the server
            # answers a second claim with 409 unless it names the live lease).
            apply_claim(held.state, await conn.call("agent.claim", lambda: params, retry=retry), lease)
            return AsyncWsAgent(self, held)
        held = Held(core.AgentState(run_id, agent_id, lease or "", 1))
        conn.held[key] = held  # before the claim: the outstanding envelope is pushed right after its answer
        try:
            apply_claim(held.state, await conn.call("agent.claim", lambda: params, retry=retry), lease)
        except BaseException:
            if conn.held.get(key) is held:
                del conn.held[key]
            raise
        held.claimed = True
        return AsyncWsAgent(self, held)


class AsyncWsAgent(AsyncAgent):
    """One claimed agent over the WebSocket: the methods of :class:`AsyncAgent`, served by pushes."""

    def __init__(self, client: AsyncWsAgentClient, held: Held) -> None:
        super().__init__(client, held.state)
        self._ws_client = client
        self._held = held

    @property
    def pushed(self) -> int:
        """Envelopes the server pushed for this agent on this client (redeliveries included)."""
        return self._held.pushed

    @property
    def _key(self) -> tuple[str, str]:
        return (self._state.run_id, self._state.agent_id)

    async def _call(self, method: str, *, retry: bool = True, gone_ok: tuple[type[Exception], ...] = (),
                    **extra: Any) -> Any:
        s = self._state

        def params() -> dict[str, Any]:  # the lease is read afresh: a reconnect may have replaced it
            return {"run_id": s.run_id, "agent_id": s.agent_id, "lease": s.lease, **extra}

        try:
            return await self._ws_client._connection().call(method, params, retry=retry, gone_ok=gone_ok)
        except RunEnded as exc:
            self._held.end(exc.status or "ended", exc.detail)
            raise

    def _ended(self) -> RunEnded:
        h = self._held
        exc = RunEnded(410, {"type": "about:blank", "title": "Gone", "status": 410, "detail": h.ended_detail},
                       "observations")
        exc.status = h.ended if h.ended != "ended" else exc.status
        return exc

    def _take(self) -> Observation | None:
        h, s = self._held, self._state
        if h.error is not None:
            error, h.error = h.error, None
            raise error
        if h.ended is not None:
            raise self._ended()
        obs = h.inbox
        if obs is None:
            self._ws_client._connection().check()
            return None
        h.inbox, h.take_any = None, False
        s.delivered_seq = max(s.delivered_seq, obs.seq)
        s.briefing_revision = max(s.briefing_revision, obs.briefing_revision)  # briefing() refetches if newer
        return obs

    async def _reclaim(self, *, redeliver: bool) -> None:
        """``agent.claim`` with the lease: the server pushes the outstanding envelope again."""
        h, s = self._held, self._state
        conn = self._ws_client._connection()
        if redeliver:
            h.take_any = True  # before sending: the push may be routed before this task runs again
        conn.held[self._key] = h
        lease = s.lease
        got = await self._call("agent.claim")
        apply_claim(s, got, lease)
        h.claimed, h.error = True, None
        s.redelivery = False

    async def briefing(self, revision: int | None = None) -> dict[str, Any]:
        """The briefing, fetched once per revision and checked against its ``content_hash``."""
        cached = core.cached_briefing(self._state, revision)
        if cached is not None:
            return cached
        return core.accept_briefing(self._state, await self._call("agent.briefing"), "agent.briefing")

    async def poll(self, wait: float = 0.0) -> Observation | None:
        """A new pushed observation within ``wait`` s, or None (then the lease is refreshed with an
        ``agent.subscribe``). Raises :class:`RunEnded` once the run has ended."""
        if self._state.redelivery:
            await self._reclaim(redeliver=True)
        with trio.move_on_after(wait):
            while True:
                obs = self._take()
                if obs is not None:
                    return obs
                await self._held.changed.wait()
        obs = self._take()
        if obs is not None:
            return obs
        await self._call("agent.subscribe")
        return self._take()

    async def next_observation(self, wait: float = 25.0) -> Observation:
        """The next pushed observation with a seq not handed out yet; refreshes the lease every ``wait`` s
        meanwhile. Raises :class:`RunEnded`."""
        while True:
            obs = await self.poll(wait)
            if obs is not None:
                return obs

    async def submit(self, observation: Observation | str, command: Mapping[str, Any], *,
                     command_id: str | None = None, next_wait: float | None = None) -> Receipt:
        """``agent.submit`` under a fresh command id (or ``command_id``); a submit cut by a lost connection is
        sent again under the same id after the reconnect (``duplicate`` if the first had been accepted).
        ``next_wait`` is accepted for the HTTP client's signature and ignored: over WebSocket the next
        observation is pushed anyway."""
        body = core.command_body(observation, command, command_id)
        receipt = core.model(await self._call("agent.submit", command=body), Receipt, "agent.submit")
        if receipt.command_id != body["command_id"]:
            raise ProtocolError(f"agent.submit: the receipt is for {receipt.command_id!r}, "
                                f"not {body['command_id']!r}")
        return receipt

    async def receipt(self, command_id: str) -> Receipt:
        """The command's receipt with its current outcome (``agent.receipt``)."""
        return core.model(await self._call("agent.receipt", command_id=command_id), Receipt, "agent.receipt")

    async def wait_outcome(self, command_id: str, *, until: Iterable[str] | None = None,
                           poll_interval: float = 0.05, timeout: float | None = None) -> Receipt:
        """Read the receipt until its outcome leaves ``pending`` (or reaches one of ``until``); an ``outcome``
        notification for this agent wakes it early."""
        wanted = None if until is None else frozenset(until)
        started = trio.current_time()
        while True:
            receipt = await self.receipt(command_id)
            done = receipt.outcome not in core.PENDING_OUTCOMES if wanted is None else receipt.outcome in wanted
            if done or receipt.status not in SUCCESS_STATUSES:
                return receipt
            if timeout is not None and trio.current_time() - started >= timeout:
                raise WaitTimeout(f"command {command_id!r} still has outcome {receipt.outcome!r} after about "
                                  f"{timeout:g} s")
            with trio.move_on_after(poll_interval):
                await self._held.changed.wait()

    async def resume(self) -> None:
        """Claim again with the lease and have the outstanding envelope redelivered (handed out again)."""
        await self._reclaim(redeliver=True)

    async def release(self) -> None:
        """``agent.release``: free the agent now; its envelopes stop coming."""
        await self._call("agent.release", gone_ok=(LeaseRejected,))
        self._state.released = True
        conn = self._ws_client._connection()
        if conn.held.get(self._key) is self._held:
            del conn.held[self._key]

    async def __aexit__(self, *exc: object) -> None:
        s = self._state
        if s.released or s.detached:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            try:
                await self.release()
            except (RunEnded, LeaseError, NotFound, TransportError, ProtocolError):
                s.released = True  # best effort: the lease is gone, or will expire on its own
