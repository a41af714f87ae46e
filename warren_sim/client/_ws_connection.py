"""The connection under the WebSocket SDK: one JSON-RPC 2.0 WebSocket to ``WS /v1/agent``, kept alive.

:class:`Connection` owns the socket's life and its frames: it connects (and reconnects with the retry policy's
backoff after a drop, an unanswered request or a silent server), says ``initialize``, claims every held agent
again with its token after a reconnect, answers the server's heartbeat ``ping``, matches answers to requests,
and routes pushed envelopes and notifications to the :class:`Held` agent they name. It knows nothing of
commands or observations beyond routing them: the driver on top, which performs the core's operations on it, is
:mod:`warren_sim.client._ws`.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx
import trio
import trio_websocket
from trio_websocket import ConnectionClosed, HandshakeError

from warren_sim.observability.tracing import with_traceparent
from warren_sim.protocol import PROTOCOL_HEADER, PROTOCOL_VERSION
from warren_sim.protocol.strict_json import StrictJSONError, loads_strict

from . import _core as core
from ._core import RetryPolicy
from ._exceptions import (
    BadRequest,
    ProtocolError,
    RunEnded,
    ServerError,
    ServiceUnavailable,
    TooManyRequests,
    TransportError,
    WarrenError,
    error_for_status,
)
from ._models import Observation

__all__ = ["WS_PATH", "Connection", "Held", "Lost", "rpc_error", "ws_url"]

#: Where the agent binding lives on a warren-agent/0 server.
WS_PATH = "/v1/agent"
INVALID_PARAMS = -32602
MAX_MESSAGE_SIZE = 16 * 2**20


def ws_url(base_url: str | httpx.URL) -> str:
    """The agent WebSocket of the server at ``base_url``: ``http://h:p/x`` -> ``ws://h:p/x/v1/agent``."""
    parts = urlsplit(str(base_url))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ValueError(f"a server URL such as http://127.0.0.1:8000 is needed, not {str(base_url)!r}")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + WS_PATH, "", ""))


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a frame's optional object members)."""
    return value if isinstance(value, dict) else {}


def _leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first exception of a (nested) exception group."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if str(exc) or cause is None:
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {type(cause).__name__}: {cause}"


def rpc_error(method: str, error: Any) -> WarrenError:
    """The SDK exception for a JSON-RPC error: HTTP-status codes map as over HTTP; -32602 is a bad request."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return ProtocolError(f"{method}: the server answered a malformed JSON-RPC error: {error!r}")
    code, message = error["code"], str(error.get("message", ""))
    data = _object(error.get("data"))
    detail = str(data.get("detail") or message)
    if 400 <= code < 600:  # data's other members (a 410's run_status) are the problem's extension members
        error = error_for_status(code, {**data, "type": "about:blank", "title": message, "status": code,
                                        "detail": detail}, method)
        wait = data.get("retry_after")
        if isinstance(error, TooManyRequests | ServiceUnavailable) and isinstance(wait, int | float):
            error.retry_after = float(wait)
        return error
    if code == INVALID_PARAMS:
        return BadRequest(400, {"type": "about:blank", "title": message, "status": 400, "detail": detail}, method)
    return ProtocolError(f"{method}: the server answered JSON-RPC error {code} ({message}): {detail}")


class Lost(Exception):
    """The connection a request went out on is gone before its answer came (retried, or a TransportError)."""


@attrs.define(eq=False)
class Waiter:
    """A request's answer, to come."""

    done: trio.Event = attrs.Factory(trio.Event)
    message: dict[str, Any] | None = None  # None once done: the connection was lost


@attrs.define(eq=False)
class Held:
    """One agent whose lease this connection holds: where its pushed envelopes and notifications land."""

    state: core.AgentState
    claimed: bool = False  # the claim answered: the lease is known (re-claimed after a reconnect)
    inbox: Observation | None = None  # the newest pushed envelope not taken yet (the core drops a seq seen before)
    # A claim was answered since an envelope was last taken: the outstanding envelope it pushes is on its way or in
    # the inbox (a redelivery needs no claim of its own).
    claim_pushed: bool = False
    ended_detail: str = ""  # why the run ended, once ``state.run_status`` says it has
    error: WarrenError | None = None  # the lease was lost at a reconnect, or a pushed envelope was malformed
    changed: trio.Event = attrs.Factory(trio.Event)
    pushed: int = 0  # envelopes pushed for this agent (redeliveries included)

    def poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def offer(self, obs: Observation) -> None:
        self.pushed += 1
        if self.inbox is None or obs.seq >= self.inbox.seq:
            self.inbox = obs
        self.poke()

    def end(self, status: str, detail: str) -> None:
        self.state.run_status, self.ended_detail = status, detail
        self.inbox = None
        self.poke()

    def take(self) -> Observation | None:
        """The pushed envelope, once; raises what went wrong for the agent, or :class:`RunEnded` once it ended."""
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        if self.state.run_status is not None:
            raise core.run_ended(self.state, self.ended_detail)
        obs, self.inbox = self.inbox, None
        if obs is not None:
            self.claim_pushed = False
        return obs


class Connection:
    """The WebSocket: requests and their answers, pushes routed to held agents, heartbeats, reconnects."""

    def __init__(self, url: str, *, retry: RetryPolicy, timeout: float,
                 socket_wrapper: Callable[[Any], Any] | None, frames: str = "batched") -> None:
        self.url, self.retry, self.timeout = url, retry, timeout
        self.frames = frames
        self.socket_wrapper = socket_wrapper
        self.held: dict[tuple[str, str], Held] = {}
        self.connections = 0  # sockets that completed the handshake (1 + reconnects)
        self._cut_claiming = 0  # sockets in the current run of failures that closed while claiming agents again
        self.pings_answered = 0
        self.heartbeat_s: float | None = None
        self.capabilities: dict[str, Any] = {}
        self._live: Any = None  # the socket requests go out on, once its handshake is done
        self._scope: trio.CancelScope | None = None  # the current socket's tasks
        self._socket: Any = None
        self._broken: WarrenError | None = None
        self._closing = False
        self._close_asked = trio.Event()
        self._finished = trio.Event()
        self._changed = trio.Event()
        self._pending: dict[int, Waiter] = {}
        self._next_id = 0
        self._last_heard = 0.0

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def check(self) -> None:
        """Raise if this connection is over: the client gave up reconnecting (or met a non-warren-agent/0
        server), or it was closed."""
        if self._broken is not None:
            if isinstance(self._broken, TransportError):
                raise TransportError(str(self._broken)) from self._broken.__cause__
            raise self._broken
        if self._closing:
            raise TransportError(f"the WebSocket client for {self.url} is closed")

    async def ready(self) -> Any:
        """The live socket, once connected (waits through a reconnect); TransportError if the client gave up."""
        while True:
            self.check()
            if self._live is not None:
                return self._live
            await self._changed.wait()

    # -- the connection's life -------------------------------------------------------------------------
    async def supervise(self) -> None:
        """Connect, and reconnect after each drop, until closed or out of retries. Never raises."""
        # As over HTTP (RetryPolicy): failures in a row are retried with backoff beyond ``attempts`` for as long
        # as the pauses add up to less than ``reconnect_s``, so a restarted server (docs/reliability.md) is found
        # again and every held agent re-claimed with its token (_handshake); then a TransportError says so.
        failures, waited, why = 0, 0.0, ""
        while not self._closing:
            try:
                was_live, why = await self._connect_once()
                if was_live:
                    failures, waited = 0, 0.0  # it was up: the next try is a reconnect, not a failure in a row
                    self._cut_claiming = 0
            except WarrenError as exc:  # not warren-agent/0 (or it refused our protocol): retrying cannot help
                self._broken = exc
            finally:
                self._down()
            if self._broken is not None or self._closing:
                break
            pause = self.retry.delay(failures)
            if failures >= self.retry.attempts + 1 and waited + pause > self.retry.reconnect_s:
                self._broken = TransportError(self._gave_up(failures, waited, why))
                break
            with trio.move_on_after(pause):
                await self._close_asked.wait()
            waited += pause
            failures += 1
        self._poke()
        for held in self.held.values():  # waiting handles learn that no envelope will come
            held.poke()
        self._finished.set()

    def _gave_up(self, failures: int, waited: float, why: str) -> str:
        held = sum(1 for h in self.held.values() if h.claimed and not h.state.released)
        if self._cut_claiming:
            # The server answered, but every socket closed while the held agents were being claimed again: one
            # connection carries all their requests, so a fault that closes it (docs/faults.md) is met about as
            # many times as often as it has agents, and the claims again of all of them must pass in a row.
            return (f"WS {self.url}: connected {self._cut_claiming} times in {waited:.1f} s, but each connection "
                    f"closed before its {held} agents were claimed again ({why}); a connection shared by many "
                    "agents closes whenever any of their requests meets a fault that closes it: share one among "
                    "fewer agents (docs/faults.md, \"A connection shared by many agents\")")
        return (f"WS {self.url}: could not connect after {failures} tries over {waited:.1f} s ({why}); is the "
                f"server running? (the SDK retries connection errors for up to {self.retry.reconnect_s:g} s: "
                "RetryPolicy.reconnect_s)")

    async def _connect_once(self) -> tuple[bool, str]:
        """One connection from TCP connect to close: (whether it got live, why it ended).

        The TCP stream is ours, opened here and always closed here: trio-websocket leaves it open when the peer
        drops TCP without a closing handshake (a server that died)."""
        parts = urlsplit(self.url)
        secure = parts.scheme == "wss"
        host, port = parts.hostname or "", parts.port or (443 if secure else 80)
        resource = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            with trio.fail_after(self.timeout):
                if secure:
                    stream: Any = await trio.open_ssl_over_tcp_stream(
                        host, port, ssl_context=ssl.create_default_context(), https_compatible=True)
                else:
                    stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            return False, _describe(exc)
        live, why = False, "the connection closed"
        fatal: WarrenError | None = None
        try:
            async with trio.open_nursery() as nursery:  # trio-websocket's reader task, and our connection's
                try:
                    with trio.fail_after(self.timeout):
                        raw = await trio_websocket.wrap_client_stream(
                            nursery, stream, parts.netloc, resource, max_message_size=MAX_MESSAGE_SIZE,
                            extra_headers=[(PROTOCOL_HEADER.encode(), PROTOCOL_VERSION.encode())])
                    self._check_handshake(raw)
                    live = await self._serve(raw if self.socket_wrapper is None else self.socket_wrapper(raw))
                    # The closing handshake needs trio-websocket's reader, so it happens before the cancel below
                    # (at once if the peer closed first).
                    with trio.move_on_after(min(self.timeout, 2.0)):
                        await raw.aclose()
                finally:
                    nursery.cancel_scope.cancel()
        except* WarrenError as group:  # the handshake says this is not warren-agent/0
            fatal = _leaf(group)  # type: ignore[assignment]
        except* (HandshakeError, ConnectionClosed, OSError, trio.TooSlowError, trio.BrokenResourceError,
                 trio.ClosedResourceError) as group:
            why = _describe(_leaf(group))
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
        if fatal is not None:
            raise fatal
        return live, why

    def _check_handshake(self, raw: Any) -> None:
        sent = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw.handshake_headers}
        got = sent.get(PROTOCOL_HEADER.lower())
        if got != PROTOCOL_VERSION:
            raise ProtocolError(f"WS {self.url}: the handshake's {PROTOCOL_HEADER} header is {got!r}, expected "
                                f"{PROTOCOL_VERSION!r}; is this a warren-agent/0 server?")

    async def _serve(self, socket: Any) -> bool:
        """Run one socket: handshake, then until it closes. True if it got as far as being live."""
        live = False
        self._last_heard = trio.current_time()
        async with trio.open_nursery() as nursery:
            self._scope, self._socket = nursery.cancel_scope, socket
            nursery.start_soon(self._reader, socket)
            try:
                await self._handshake(socket)
            except Lost:
                nursery.cancel_scope.cancel()
            except WarrenError as exc:
                self._broken = exc
                nursery.cancel_scope.cancel()
            else:
                live = True
                self.connections += 1
                self._live = socket
                self._poke()
                if self.heartbeat_s:
                    nursery.start_soon(self._watchdog, socket, self.heartbeat_s)
        return live

    async def _handshake(self, socket: Any) -> None:
        # batched frames: what the server sends at once (the reply to a submit and the envelopes it set off, several
        # notifications) arrives as one JSON array frame, one read and one parse instead of several
        init = await self._request(socket, "initialize", {"protocol": PROTOCOL_VERSION, "frames": self.frames})
        if not isinstance(init, dict) or init.get("protocol") != PROTOCOL_VERSION:
            raise ProtocolError(f"WS {self.url}: initialize answered {init!r}; expected protocol "
                                f"{PROTOCOL_VERSION!r}")
        self.capabilities = _object(init.get("capabilities"))
        if any(h.claimed for h in self.held.values()):
            self._cut_claiming += 1  # taken back in supervise if the claims again all pass
        beat = self.capabilities.get("heartbeat_s")
        self.heartbeat_s = float(beat) if isinstance(beat, int | float) and beat > 0 else None
        for held in list(self.held.values()):  # a reconnect: claim every held agent again with its token
            s = held.state
            if not held.claimed or s.released or s.run_status is not None:
                continue
            try:
                held.claim_pushed = True
                got = await self._reclaim(socket, s)
                core.accept_claim(s, got, s.lease, "agent.claim")
            except RunEnded as exc:
                held.end(exc.status or "ended", exc.detail)
            except (ServerError, ProtocolError) as exc:  # held by another lease now, run gone...
                held.error = exc
                held.poke()

    async def _reclaim(self, socket: Any, s: core.AgentState) -> Any:
        """A held agent claimed again with its token on a new connection; a 503 (nothing done) is waited out. It
        proposes a token too (:func:`core.claim`), for a lease that ended meanwhile is replaced by a fresh one."""
        attempt, waited = 0, 0.0
        if not s.proposal:
            s.proposal = core.new_proposal()
        while True:
            try:
                return await self._request(socket, "agent.claim", {"run_id": s.run_id, "agent_id": s.agent_id,
                                                                   "lease": s.lease, "proposed_lease": s.proposal})
            except ServiceUnavailable as exc:
                waited = await self._wait_out(exc, attempt, waited)
                attempt += 1

    async def _wait_out(self, exc: ServiceUnavailable, attempt: int, waited: float) -> float:
        """Pause for a 503's retry_after (nothing was done), or raise it once the RetryPolicy gives up; the
        pauses so far, this one counted as at least its backoff (``RetryPolicy.gives_up``)."""
        retry = self.retry
        pause = retry.delay(attempt) if exc.retry_after is None else min(exc.retry_after, retry.max_retry_after)
        counted = max(pause, retry.delay(attempt))
        if retry.gives_up(attempt, waited, counted):
            raise exc
        await trio.sleep(pause)
        return waited + counted

    def _down(self) -> None:
        self._live = self._socket = self._scope = None
        for waiter in list(self._pending.values()):
            waiter.done.set()  # message stays None: lost
        self._pending.clear()
        self._poke()

    def _kill(self, socket: Any) -> None:
        """Give up on ``socket`` (unanswered request, silent server): the supervisor reconnects."""
        if self._socket is socket and self._scope is not None:
            self._live = None
            self._scope.cancel()

    async def _watchdog(self, socket: Any, heartbeat_s: float) -> None:
        while True:
            await trio.sleep(heartbeat_s)
            if trio.current_time() - self._last_heard > 3 * heartbeat_s:
                self._kill(socket)
                return

    async def close(self) -> None:
        """Stop: end the current connection with a closing handshake, do not reconnect."""
        self._closing = True
        self._close_asked.set()
        if self._scope is not None:
            self._scope.cancel()
        self._poke()
        with trio.move_on_after(3):
            await self._finished.wait()

    # -- frames ----------------------------------------------------------------------------------------
    async def _reader(self, socket: Any) -> None:
        try:
            while True:
                raw = await socket.get_message()
                self._last_heard = trio.current_time()
                await self._dispatch(socket, raw)
        except ConnectionClosed:
            pass
        except ProtocolError as exc:
            self._broken = exc
        finally:
            if self._scope is not None and self._socket is socket:
                self._live = None
                self._scope.cancel()

    async def _dispatch(self, socket: Any, raw: str | bytes) -> None:
        try:
            message = loads_strict(raw)
        except StrictJSONError as exc:
            raise ProtocolError(f"WS {self.url}: a frame is not acceptable JSON: {exc}") from None
        for one in message if isinstance(message, list) and message else [message]:  # a batched frame: in order
            await self._dispatch_one(socket, one, raw)

    async def _dispatch_one(self, socket: Any, message: Any, raw: str | bytes) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise ProtocolError(f"WS {self.url}: a frame is not a JSON-RPC 2.0 message: {str(raw)[:200]}")
        method, rid = message.get("method"), message.get("id")
        if isinstance(method, str):
            params = _object(message.get("params"))
            if "id" in message:
                await self._answer(socket, rid, method, params)
            else:
                self._notification(method, params)
            return
        waiter = self._pending.pop(rid, None) if isinstance(rid, int) and not isinstance(rid, bool) else None
        if waiter is not None:
            waiter.message = message
            waiter.done.set()

    async def _answer(self, socket: Any, rid: Any, method: str, params: dict[str, Any]) -> None:
        """The server's requests: ``ping`` (its heartbeat; unanswered, it drops us after three intervals)."""
        if method == "ping":
            now = int(trio.current_time() * 1e9)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": {
                "origin_ns": params.get("origin_ns"), "receive_ns": now, "transmit_ns": now}}
            self.pings_answered += 1
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found",
                                                            "data": {"detail": "this client answers ping only"}}}
        try:
            await socket.send_message(json.dumps(reply))
        except ConnectionClosed:
            pass  # the reader's next get_message says so

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method in ("observation", "observations"):
            items = [params] if method == "observation" else params.get("envelopes")
            if not isinstance(items, list):
                raise ProtocolError(f"WS {self.url}: an observations notification without an envelopes list")
            for item in items:
                env = item.get("envelope") if isinstance(item, dict) else None
                held = self._held_for(env)
                if held is None:
                    continue
                try:
                    held.offer(core.model(env, Observation, f"the {method} notification"))
                except ProtocolError as exc:
                    held.error = exc
                    held.poke()
            self._outcomes(params.get("outcomes"))  # outcomes that changed ride in the same frame
        elif method in ("outcome", "outcomes"):
            self._outcomes([params] if method == "outcome" else params.get("outcomes"))
        elif method == "run.status":
            held = self._held_for(params)
            status = params.get("status")
            if held is not None and isinstance(status, str):
                result = _object(params.get("detail"))
                reason = result.get("reason")
                held.end(status, f"{held.state.run_id} has ended with status {status}"
                                 + (f" ({reason})" if reason else "") + "; there will be no more observations")
        # other notifications are ignored (forward compatible)

    def _outcomes(self, notes: Any) -> None:
        """Wake the handles whose commands changed outcome (``outcome``, ``outcomes``, or the ``outcomes`` of an
        observation frame): ``wait_outcome`` wakes and reads the receipt."""
        for note in notes if isinstance(notes, list) else []:
            held = self._held_for(note)
            if held is not None:
                held.poke()

    def _held_for(self, params: Any) -> Held | None:
        """The held agent a notification (or an envelope) names by ``run_id`` and ``agent_id``."""
        if not isinstance(params, dict):
            return None
        run_id, agent_id = params.get("run_id"), params.get("agent_id")
        if not isinstance(run_id, str) or not isinstance(agent_id, str):
            return None
        return self.held.get((run_id, agent_id))

    # -- requests --------------------------------------------------------------------------------------
    async def _request(self, socket: Any, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        rid = self._next_id
        waiter = Waiter()
        self._pending[rid] = waiter
        params = with_traceparent(params)  # the current span's, when the program traces (as HTTP's headers)
        try:
            try:
                await socket.send_message(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                                      "params": params}, ensure_ascii=False))
            except ConnectionClosed as exc:
                self._kill(socket)
                raise Lost(f"the connection closed while sending {method}") from exc
            with trio.move_on_after(self.timeout) as scope:
                await waiter.done.wait()
            if scope.cancelled_caught:
                self._kill(socket)
                raise Lost(f"no answer to {method} within {self.timeout:g} s")
        finally:
            self._pending.pop(rid, None)
        message = waiter.message
        if message is None:
            raise Lost(f"the connection closed before the answer to {method} came")
        if "error" in message:
            raise rpc_error(method, message["error"])
        if "result" not in message:
            raise ProtocolError(f"{method}: the answer has neither result nor error")
        return message["result"]

    async def call(self, method: str, params: Callable[[], dict[str, Any]], *, retry: bool = True,
                   gone_ok: tuple[type[Exception], ...] = ()) -> Any:
        """Send a request and return its result. A request cut by a lost connection is sent again (with
        ``params()`` built afresh) on the next one when ``retry``; an error in ``gone_ok`` on such a retry
        means the first try got through, and returns None."""
        attempt, waited = 0, 0.0
        while True:
            socket = await self.ready()
            try:
                return await self._request(socket, method, params())
            except Lost as exc:
                # the connection went (a restart, a reset): reconnecting is paced by the supervisor, so a lost
                # request is sent again on the next connection for as long as reconnecting is (RetryPolicy)
                counted = self.retry.delay(attempt)
                if not retry or self.retry.gives_up(attempt, waited, counted):
                    tries = f" (after {attempt + 1} tries)" if attempt else ""
                    raise TransportError(f"{method} over {self.url} failed{tries}: {exc}") from exc
                waited += counted
                attempt += 1
            except ServiceUnavailable as exc:  # nothing was done: retried after its retry_after, whatever the method
                waited = await self._wait_out(exc, attempt, waited)
                attempt += 1
            except gone_ok:
                if attempt == 0:
                    raise
                return None

