"""The WebSocket driver of the trio SDK: :class:`AsyncWsAgentClient` drives agents over ``WS /v1/agent``.

Same API as :class:`~warren_sim.client.AsyncAgentClient` (runs are still created and inspected over HTTP: the
binding has no run methods), but each agent handle is served by one shared JSON-RPC 2.0 WebSocket instead of
long-polls (the agent WebSocket binding of ``docs/client.md``)::

    async with warren_sim.client.open("http://127.0.0.1:8000", transport="ws") as client:
        run = await client.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1", "courier-1"])
        async with client.claim(run.run_id, "engineer-1") as eng, client.claim(run.run_id, "courier-1") as cou:
            ...   # both leases on one connection; pushed envelopes are routed to their handle

This module is a third driver of :mod:`._core`, beside the HTTP ones: an agent handle runs the same core
operations as over HTTP (so the same de-duplication by seq, receipt-id check, ``wait_outcome`` and release on
exit), and :meth:`AsyncWsAgentClient._drive` performs their effects on the connection: a
:class:`~._core.Request` as its JSON-RPC method, an :class:`~._core.Observe` as the wait for a pushed envelope,
a :class:`~._core.Sleep` that a push for its agent may end early, a :class:`~._core.Call` over HTTP. The
connection under it (JSON-RPC framing, the reader task, heartbeats, reconnects) is :mod:`._ws_connection`.
What the binding changes:

* ``async with`` is required: the connection lives in a nursery the client opens on entry (a background task
  reads frames, answers the server's heartbeat pings, routes pushes and reconnects).
* ``agent.claim`` subscribes the connection to the agent; the server pushes the outstanding envelope and every
  later one (``observation``/``observations`` notifications). Each handle keeps the newest pushed envelope; the
  core hands each seq out once.
* A redelivery (``agent.resume()``, ``agent.redeliver()``) is a claim with the lease, after which the server
  pushes the outstanding envelope again (none is sent when a claim was answered since the last envelope was
  handed out: its push is the redelivery).
* When the connection drops (or a request goes unanswered for ``timeout`` s, or the server falls silent for
  three heartbeat intervals) the client reconnects with the retry policy's backoff, sends ``initialize`` and
  claims every held agent again with its lease token; the server then pushes each outstanding envelope again.
  Requests cut by the drop are sent again on the new connection where that cannot do harm (the core's
  :data:`~._core.Retry`): ``submit`` under the *same* command id (an acceptance whose answer was lost comes back
  ``duplicate``: success, one acceptance), reads, a claim (a fresh one proposes its token, so its retry resumes
  the lease whose answer was lost), release.
* JSON-RPC errors whose code is an HTTP status raise the same exceptions as over HTTP (``RunEnded`` on 410,
  ``LeaseRejected`` on 403 ...); ``run.status`` notifications end the handle's observations with ``RunEnded``.
* ``next_observation(wait)``/``poll(wait)``: every ``wait`` s without an envelope the handle sends an
  ``agent.subscribe`` (an authenticated request: it keeps the lease alive, as a long-poll does over HTTP, and
  turns a run that ended unseen into ``RunEnded``). ``submit(next_wait=)`` has nothing to do: the next envelope
  is pushed anyway.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import trio

from . import _core as core
from ._async import AsyncAgent, AsyncAgentClient, drive
from ._core import Op, RetryPolicy
from ._exceptions import RunEnded, WarrenError
from ._models import Observation
from ._ws_connection import Connection, Held, ws_url

__all__ = ["AsyncWsAgent", "AsyncWsAgentClient", "ws_url"]

T = TypeVar("T")


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
                               "`async with warren_sim.client.open(url, transport='ws')`) before claiming agents")
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
        held = self._connection().held.get((run_id, agent_id))
        if held is not None and held.claimed and not held.state.released:
            # This connection holds the agent already: one inbox per agent, shared by its handles. The claim is
            # sent as asked (the server answers 409 unless it names the live lease) and does not touch the
            # shared state unless it succeeds.
            asked = await self._drive(core.claim(core.AgentState(run_id, agent_id, lease or "")), None)
            shared = held.state
            shared.lease, shared.resumed = asked.lease, asked.resumed
            shared.briefing_revision = max(shared.briefing_revision, asked.briefing_revision)
        else:
            held = Held(core.AgentState(run_id, agent_id, lease or ""))
            await self._drive(core.claim(held.state), held)
        return AsyncWsAgent(self, held)

    # -- the driver ------------------------------------------------------------------------------------
    async def _drive(self, op: Op[T], held: Held | None) -> T:
        """Run a core operation of the agent ``held`` (None: of no agent this connection holds) on the
        connection: each effect performed, its result or its error handed back."""
        with core.Steps(op) as steps:
            for effect in steps:
                try:
                    if isinstance(effect, core.Request):
                        reply = await self._request(effect, held)
                    elif isinstance(effect, core.Observe):
                        assert held is not None and effect.state is held.state, "a wait is driven by its handle"
                        reply = await self._observe(effect, held)
                    elif isinstance(effect, core.Call):  # the binding has no run methods: over HTTP
                        reply = await drive(self.http, core.http_call(effect, self.retry))
                    else:
                        reply = await self._pause(effect, held)
                except WarrenError as exc:
                    steps.throw(exc)
                else:
                    steps.send(reply)
        return steps.result

    async def _pause(self, sleep: core.Sleep, held: Held | None) -> float:
        """``sleep``, ended early by a push for its ``wake`` agent (its command's outcome changed)."""
        if held is None or sleep.wake is not held.state:
            await trio.sleep(sleep.seconds)
            return sleep.seconds
        started = trio.current_time()
        with trio.move_on_after(sleep.seconds):
            await held.changed.wait()
        return trio.current_time() - started

    async def _request(self, request: core.Request, held: Held | None) -> Any:
        """``request`` as its JSON-RPC method. A claim subscribes the connection to ``held``: the handle is
        registered before the request goes out, for the outstanding envelope is pushed right after the answer."""
        conn = self._connection()
        state, call = request.state, request.http
        key = (state.run_id, state.agent_id)
        registered = held is not None and conn.held.get(key) is held
        claiming = held if request.rpc == "agent.claim" else None
        if claiming is not None:
            conn.held[key] = claiming
            claiming.claim_pushed = True
        try:
            result = await conn.call(request.rpc, request.rpc_params, retry=call.retry in ("safe", "brief"),
                                     gone_ok=call.gone_ok)
        except BaseException as exc:
            if claiming is not None and not registered and conn.held.get(key) is claiming:
                del conn.held[key]
            if isinstance(exc, RunEnded) and held is not None:
                held.end(exc.status or "ended", exc.detail)
            raise
        if claiming is not None:
            claiming.claimed, claiming.error = True, None
        elif request.rpc == "agent.release" and registered:
            del conn.held[key]  # its envelopes stop coming
        return result

    async def _observe(self, observe: core.Observe, held: Held) -> Observation | None:
        """The newest envelope pushed for ``held`` within ``observe.wait`` s (the core drops a seq seen before),
        else None after an ``agent.subscribe`` (which keeps the lease alive and meets a run that ended unseen)."""
        if observe.redelivery and not held.claim_pushed:
            await self._drive(core.claim(held.state), held)  # the server pushes the outstanding envelope again
        with trio.move_on_after(observe.wait):
            while (obs := self._take(held)) is None:
                await held.changed.wait()
            return obs
        obs = self._take(held)
        if obs is None:
            await self._request(core.Request("agent.subscribe", held.state, observe.http), held)
            obs = self._take(held)
        return obs

    def _take(self, held: Held) -> Observation | None:
        obs = held.take()
        if obs is None:
            self._connection().check()  # no envelope will come on a connection that is over
        return obs


class AsyncWsAgent(AsyncAgent):
    """One claimed agent over the WebSocket: the methods of :class:`AsyncAgent`, its operations driven on the
    client's connection."""

    def __init__(self, client: AsyncWsAgentClient, held: Held) -> None:
        super().__init__(client, held.state)
        self._ws_client = client
        self._held = held

    @property
    def pushed(self) -> int:
        """Envelopes the server pushed for this agent on this client (redeliveries included)."""
        return self._held.pushed

    async def _run(self, op: Op[T]) -> T:
        return await self._ws_client._drive(op, self._held)
