"""The agent WebSocket binding of warren-agent/0: ``WS /v1/agent``, JSON-RPC 2.0 both ways.

HTTP long-polling stays canonical; this binding carries the same semantics at a lower cost per
decision. Everything that matters is shared with HTTP: each method is one call of the agent operation
of its kind (:mod:`warren_sim.runtime.agent_ops`, which HTTP's routes call too), so leases, verdicts,
refusals, deadlines and the journal are the same. What the binding adds is pushing: a connection
subscribed to agents gets their envelopes as notifications, several agents woken in one batch in one
``observations`` frame. The connection itself is :mod:`.ws_lane`'s (the handshake, the frames' I/O).

Error codes: JSON-RPC's own for protocol faults (-32700 parse error, -32600 invalid request and
batches, -32601 unknown method, -32602 bad params, with a teaching ``data``); for refusals that
HTTP expresses with a status, ``code`` is that HTTP status (401, 403, 404, 409, 410, 422, 429)
and ``data`` carries ``{"status", "detail"}`` — one table of meanings for both transports; an ended
run's 410 adds ``run_status``, its terminal status, as the problem body does over HTTP.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import attrs
import orjson
import trio

from .. import __version__
from ..protocol import PROTOCOL_HEADER, PROTOCOL_VERSION, case_hint
from ..protocol.converter import converter
from ..protocol.models import problem
from ..protocol.strict_json import StrictJSONError, loads_strict
from ..runtime import agent_ops
from ..runtime.api import RunAPI
from ..runtime.clock import wall_seconds
from ..runtime.errors import RunError
from ..runtime.faults import Fault
from ..runtime.leases import RemoteAgent
from ..runtime.manager import RunManager
from ..runtime.views import current_wire

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
NOTIFICATIONS = ("observation", "observations", "outcome", "outcomes", "run.status")
OBSERVATION_PARTS = ("agent", "time", "busy", "you", "place", "visible", "messages", "messages_dropped",
                     "events", "events_dropped", "objectives", "tools")
PARTS = ("observation", "text", "affordances", *OBSERVATION_PARTS)
# "single": one JSON-RPC message per frame. "batched" (asked for in initialize): the messages that leave at
# once (a reply and the envelopes its request set off, several notifications) leave as one JSON array frame.
FRAMES = ("single", "batched")
#: A flush of many envelopes leaves in about this many frames (batched frames only), each of at least
#: ``PIPELINE_MIN`` envelopes and ``PIPELINE_BYTES`` bytes: see ``AgentSession._flush``. (64 warren agents'
#: whole envelopes, about 3 KB each: four frames; 64 echo agents' of a few hundred bytes: one, for there a
#: frame costs more than building the envelopes it would overlap; bench/RESULTS.md, issue 30.)
PIPELINE_FRAMES = 4
PIPELINE_MIN = 16
PIPELINE_BYTES = 32 * 1024


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _bad_params(detail: str) -> RpcError:
    return RpcError(INVALID_PARAMS, "Invalid params", {"detail": detail})


def _str_param(params: dict[str, Any], name: str, method: str, *, optional: bool = False) -> Any:
    value = params.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise _bad_params(f"{method} needs params.{name}, a non-empty string"
                          + ("" if value is None else f"; got {json.dumps(value)[:40]}"))
    return value


def _int_param(params: dict[str, Any], name: str, method: str) -> int:
    value = params.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 2**53 - 1:
        raise _bad_params(f"{method} needs params.{name}, an integer within +/-(2^53-1)")
    return value


def _parts_param(params: dict[str, Any], method: str) -> tuple[str, ...] | None:
    """``params.parts`` (None when absent: every part): which parts of each envelope the connection receives."""
    parts = params.get("parts")
    if parts is None:
        return None
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts) or \
            any(p not in PARTS for p in parts):
        raise _bad_params(f"{method}: params.parts must be a list drawn from {', '.join(PARTS)}")
    return tuple(parts)


@attrs.define(eq=False)
class Subscription:
    run: RunAPI
    agent: RemoteAgent
    last_seq: int = -1
    parts: tuple[str, ...] = PARTS
    outcomes: dict[str, str] = attrs.Factory(dict)  # command id -> last outcome sent
    ended_sent: bool = False
    listener: Any = None  # in agent.listeners while subscribed: notes the wake for the connection's sender


class Peer(Protocol):
    """The connection's other end, as the session needs it (:class:`.ws_lane.AsgiPeer`; a test may bring its own)."""

    async def receive(self) -> str | bytes | None:
        """The next message; None once the peer has gone."""

    async def send(self, text: str) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


class AgentSession:
    """One WebSocket connection: its subscriptions, its heartbeat, its sender."""

    def __init__(self, manager: RunManager, heartbeat_s: float, peer: Peer) -> None:
        self.peer = peer
        self.manager = manager
        self.heartbeat_s = heartbeat_s
        self.subs: dict[tuple[str, str], Subscription] = {}
        self.wake = trio.Event()
        self.woken: dict[Subscription, None] = {}  # subscriptions whose agent changed since the last flush
        self._rescan_all = True
        self.last_heard = trio.current_time()
        self.send_lock = trio.Lock()
        self.server_ping = 0
        self.initialized = False
        self.nursery: trio.Nursery | None = None
        self._batching = False  # inside agent.submit_many: accepted verdicts are written once, at its end
        self.batched_frames = False  # initialize's frames "batched": what leaves at once, one array frame
        self.outbox: list[dict[str, Any]] = []  # replies waiting for the sender (batched frames only)
        self._to_write: dict[str, RunAPI] = {}
        self.accepted_in: dict[str, RunAPI] = {}  # runs whose journals took an accept for this reply
        self.after_reply: Fault | None = None  # a lost_reply or delay fault of the request being answered
        self.restarts = manager.restarts  # the server's restart faults so far: one more ends this session
        self.metrics = manager.metrics  # each method timed under its name (verdicts are counted by agent_ops)
        self.via = agent_ops.WS  # the method being handled: its trace context, when tracing is on (dispatch)

    async def send(self, message: dict[str, Any] | list[dict[str, Any]]) -> None:
        """One frame: a message, or (batched frames) an array of them."""
        # orjson: the frames are plain JSON types; 5-10x cheaper than json.dumps for a batch of envelopes
        text = orjson.dumps(message).decode()
        lock = self.send_lock
        try:  # a free lock taken without trio's scheduling round (acquire() always yields once)
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self.peer.send(text)
        finally:
            lock.release()

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self._sender)
            nursery.start_soon(self._heartbeat)
            nursery.start_soon(self._close_on_restart)
            try:
                while True:
                    raw = await self.peer.receive()
                    if raw is None:
                        return  # the peer went away
                    if self.manager.restarts != self.restarts:  # a crashed server never reads what came after
                        await trio.sleep_forever()  # the sender closes the connection and ends the session
                    self.last_heard = trio.current_time()
                    try:
                        reply = self.handle(raw)
                    except CloseConnection as close:
                        await self._close_for_fault(close.code, close.reason)
                        return
                    fault, self.after_reply = self.after_reply, None
                    if fault is not None and fault.fault == "lost_reply":
                        await self._close_for_fault(1011, f"an injected fault: lost_reply ({fault.request} "
                                                          f"#{fault.index} of {fault.agent_id}): served, reply lost")
                        return
                    if fault is not None:  # delay
                        await trio.sleep(fault.delay_s)
                    if self.accepted_in:  # --fsync: on disk before the receipt leaves (one fsync per tick)
                        runs, self.accepted_in = self.accepted_in, {}
                        for run in runs.values():
                            await run.journal.durable()
                    if reply is not None and self.batched_frames:
                        self.outbox.append(reply)  # leaves with what the request set off (the next envelopes)
                        self._poke()
                    elif reply is not None:
                        await self.send(reply)
                    if self.woken:  # a claim, a subscribe or an accepted command has something to push
                        self._poke()
            finally:
                for sub in self.subs.values():
                    _unlisten(sub)
                nursery.cancel_scope.cancel()

    # -- requests ------------------------------------------------------------------------------------
    def handle(self, raw: str | bytes) -> dict[str, Any] | None:
        """One incoming frame -> the response to send (None for notifications and our pings' answers)."""
        try:
            message = loads_strict(raw)
        except StrictJSONError as exc:
            return _error(None, PARSE_ERROR, "Parse error", {"detail": str(exc)})
        if isinstance(message, list):
            return _error(None, INVALID_REQUEST, "Invalid Request",
                          {"detail": "batch requests are refused; send one request per frame (agent.submit_many "
                                     "submits several commands in one request)"})
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "Invalid Request",
                          {"detail": 'a request is an object with "jsonrpc": "2.0", "method", "params" and "id"'})
        rid = message.get("id")
        if "method" not in message:
            if "result" in message or "error" in message:
                return None  # the answer to one of our pings: hearing it is all we need
            return _error(rid, INVALID_REQUEST, "Invalid Request", {"detail": "missing method"})
        method = message["method"]
        if not isinstance(method, str):
            return _error(rid, INVALID_REQUEST, "Invalid Request", {"detail": "method must be a string"})
        if rid is not None and not isinstance(rid, str | int) or isinstance(rid, bool):
            return _error(None, INVALID_REQUEST, "Invalid Request", {"detail": "id must be a string or an integer"})
        params = message.get("params", {})
        if not isinstance(params, dict):
            return _error(rid, INVALID_PARAMS, "Invalid params", {"detail": "params must be an object"})
        handler = METHODS.get(method)
        if handler is None:
            if "id" not in message:
                return None
            return _error(rid, METHOD_NOT_FOUND, "Method not found",
                          {"detail": f"unknown method {method!r}; methods: {', '.join(METHODS)}"})
        fault = self._fault(method, params) if self.manager.faults.plans else None
        if fault is not None:
            early = self._before(fault, rid)
            if early is not None:
                return early
        began = wall_seconds()
        reply = self.dispatch(handler, params, rid)
        self.metrics.request(method, "ws", wall_seconds() - began)
        if fault is not None and fault.fault == "redeliver":
            sub = self.subs.get((str(params.get("run_id")), str(params.get("agent_id"))))
            if sub is not None and sub.last_seq >= 0:
                sub.last_seq -= 1  # the envelope it was pushed last is pushed again
                self.woken[sub] = None
        if fault is not None and fault.fault in ("lost_reply", "delay"):
            self.after_reply = fault  # serve() loses or holds back this reply
        return reply if "id" in message else None

    # -- faults (docs/faults.md): decided in agent_ops, done here to the connection --------------------------
    def _fault(self, method: str, params: dict[str, Any]) -> Fault | None:
        kind = FAULT_KINDS.get(method)
        run_id, agent_id = params.get("run_id"), params.get("agent_id")
        if kind is None or not isinstance(run_id, str) or not isinstance(agent_id, str):
            return None
        if run_id not in self.manager.faults.plans:
            return None
        lease, proposed = params.get("lease"), params.get("proposed_lease")
        retriable = kind != "claim" or agent_ops.claim_retriable(
            self.manager, run_id, agent_id, lease if isinstance(lease, str) else None,
            proposed if isinstance(proposed, str) else None)
        return agent_ops.fault(self.manager, run_id, agent_id, kind, websocket=True, retriable=retriable)

    async def _close_on_restart(self) -> None:
        """A ``restart`` fault closes every agent WebSocket with 1012 (service restart), as a crash would: the
        runs it held were rebuilt from their journals, and the client reconnects and claims again with its tokens.
        The sender closes it (:meth:`_sender`), after the replies of the requests served before: a claim granted
        just before the restart keeps its reply, whose token the client could not learn otherwise."""
        await self.manager.restarted.wait()
        self._poke()

    async def _close_for_fault(self, code: int, reason: str) -> None:
        """Close the connection for a fault, after the replies already due to other requests (batched frames wait
        in the outbox): a fault loses its own request's reply, not the replies of requests served before it."""
        if self.outbox:
            await self._flush()
        await self.peer.close(code, reason)

    def _before(self, fault: Fault, rid: Any) -> dict[str, Any] | None:
        """What a fault does before its request is served: close the connection (``reset``: 1011, ``disconnect``:
        1012), or answer 503 (``unavailable``); None to serve the request."""
        if fault.fault in ("reset", "disconnect"):
            raise CloseConnection(1012 if fault.fault == "disconnect" else 1011,
                                  f"an injected fault: {fault.fault} ({fault.request} #{fault.index} of "
                                  f"{fault.agent_id})")
        if fault.fault == "unavailable":
            detail = (f"the server is unavailable (an injected fault: unavailable, {fault.request} #{fault.index} "
                      f"of {fault.agent_id}); retry after data.retry_after seconds")
            return _error(rid, 503, problem(503, detail)["title"], {"status": 503, "detail": detail,
                                                                    "retry_after": 0})
        return None

    def dispatch(self, handler: Any, params: dict[str, Any], rid: Any) -> dict[str, Any]:
        """Call a method on parsed params: its result, or its refusal as a JSON-RPC error.

        With tracing on, ``params.traceparent`` (and ``tracestate``) is the method's trace context for agent_ops;
        each command of ``agent.submit_many`` may carry its own (the agents of one request make their own
        traces), else it inherits the request's."""
        outer = self.via
        if self.manager.tracer.enabled:
            parent, state = params.get("traceparent"), params.get("tracestate")
            if isinstance(parent, str):
                self.via = agent_ops.Via("ws", parent, state if isinstance(state, str) else None)
        try:
            result = handler(self, params)
        except RpcError as exc:
            return _error(rid, exc.code, exc.message, exc.data)
        except RunError as exc:
            data = {"status": exc.status, "detail": exc.detail}
            if exc.run_status is not None:  # an ended run's 410: its terminal status as data
                data["run_status"] = exc.run_status
            return _error(rid, exc.status, problem(exc.status, exc.detail)["title"], data)  # HTTP's status phrase
        finally:
            self.via = outer
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _agent(self, params: dict[str, Any], method: str) -> tuple[RunAPI, str, str | None]:
        """The run, the agent and the lease a method names (``run_id``, ``agent_id``, ``lease``: -32602 when they
        are not strings; 404 for an unknown run)."""
        run = self.manager.get(_str_param(params, "run_id", method))
        return run, _str_param(params, "agent_id", method), _str_param(params, "lease", method, optional=True)

    def m_initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocol", PROTOCOL_VERSION)
        if asked != PROTOCOL_VERSION:
            raise RunError(409, f"this server speaks {PROTOCOL_VERSION}; initialize asked for {asked!r}"
                           + (case_hint(asked) if isinstance(asked, str) else ""))
        frames = params.get("frames", "single")
        if frames not in FRAMES:
            raise _bad_params(f"initialize: params.frames must be one of {', '.join(FRAMES)}; got "
                              f"{json.dumps(frames)[:40]}")
        self.initialized = True
        self.batched_frames = frames == "batched"
        return {"protocol": PROTOCOL_VERSION, "server": f"warren {__version__}", "frames": frames,
                "capabilities": {"methods": list(METHODS), "notifications": list(NOTIFICATIONS),
                                 "subscribe_parts": list(PARTS), "heartbeat_s": self.heartbeat_s,
                                 "batched_observations": True, "frames": list(FRAMES)}}

    def m_ping(self, params: dict[str, Any]) -> dict[str, Any]:
        origin = _int_param(params, "origin_ns", "ping")
        now = _clock_ns()
        return {"origin_ns": origin, "receive_ns": now, "transmit_ns": now}

    def m_claim(self, params: dict[str, Any]) -> dict[str, Any]:
        run = self.manager.get(_str_param(params, "run_id", "agent.claim"))
        agent_id = _str_param(params, "agent_id", "agent.claim")
        parts = _parts_param(params, "agent.claim")
        token, resumed = agent_ops.claim(run, agent_id, _str_param(params, "lease", "agent.claim", optional=True),
                                         self.via, _str_param(params, "proposed_lease", "agent.claim", optional=True))
        sub = self._subscribe(run, run.agent(agent_id))
        if parts is not None:  # as agent.subscribe's parts, without a second request before the first envelope
            sub.parts = parts
        return {"lease": token, "briefing_revision": agent_ops.BRIEFING_REVISION, "resumed": resumed}

    def m_release(self, params: dict[str, Any]) -> dict[str, Any]:
        run, agent_id, lease = self._agent(params, "agent.release")
        agent_ops.release(run, agent_id, lease, self.via)
        sub = self.subs.pop((run.run_id, agent_id), None)
        if sub is not None:
            _unlisten(sub)
        return {"agent_id": agent_id, "released": True}

    def m_briefing(self, params: dict[str, Any]) -> dict[str, Any]:
        return agent_ops.briefing(*self._agent(params, "agent.briefing"), self.via)

    def m_subscribe(self, params: dict[str, Any]) -> dict[str, Any]:
        run, agent_id, lease = self._agent(params, "agent.subscribe")
        ra = agent_ops.subscribe(run, agent_id, lease, self.via)
        parts = _parts_param(params, "agent.subscribe")
        sub = self._subscribe(run, ra, keep_seq=True)
        sub.parts = PARTS if parts is None else parts
        return {"agent_id": ra.agent_id, "parts": list(sub.parts)}

    def m_submit(self, params: dict[str, Any]) -> dict[str, Any]:
        run, agent_id, lease = self._agent(params, "agent.submit")
        ra = agent_ops.authenticate(run, agent_id, lease)
        defer = self._batching and not run.is_ended  # an ended run's journal is closed: it writes each record at once
        judgement = agent_ops.submit(run, ra, params.get("command"), lease, write=not defer, via=self.via)
        if defer and judgement.accept:
            self._to_write[run.run_id] = run
        if judgement.accept:
            self.accepted_in[run.run_id] = run
        assert judgement.receipt is not None  # agent_ops.submit refuses a command without one (422)
        sub = self.subs.get((run.run_id, ra.agent_id))
        if sub is not None and judgement.accept:
            # tracked from here; it changes when the run adjudicates, which pokes the agent (so its listener)
            sub.outcomes[judgement.receipt.command_id] = judgement.receipt.outcome
        return converter.unstructure(judgement.receipt)

    def m_submit_many(self, params: dict[str, Any]) -> dict[str, Any]:
        items = params.get("commands")
        if not isinstance(items, list) or not items:
            raise _bad_params("agent.submit_many needs params.commands, a non-empty list of "
                              "{run_id, agent_id, lease, command}")
        out: list[dict[str, Any]] = []
        self._batching = True
        try:
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    out.append({"error": {"code": INVALID_PARAMS, "message": "Invalid params",
                                          "data": {"detail": f"commands[{i}] must be an object"}}})
                    continue
                # judged on the parsed item as agent.submit would judge it: no re-encoding, no second parse
                reply = self.dispatch(AgentSession.m_submit, item, i)
                out.append({"receipt": reply["result"]} if "result" in reply else {"error": reply["error"]})
        finally:
            self._batching = False
            # the accepted verdicts of every command, written in one write per run before the reply leaves
            for run in self._to_write.values():
                run.journal.write_through()
            self._to_write.clear()
        return {"results": out}

    def m_receipt(self, params: dict[str, Any]) -> dict[str, Any]:
        run, agent_id, lease = self._agent(params, "agent.receipt")
        cid = _str_param(params, "command_id", "agent.receipt")
        return converter.unstructure(agent_ops.receipt(run, agent_id, lease, cid, self.via))

    # -- pushing -------------------------------------------------------------------------------------
    def _subscribe(self, run: RunAPI, ra: RemoteAgent, keep_seq: bool = False) -> Subscription:
        key = (run.run_id, ra.agent_id)
        sub = self.subs.get(key)
        if sub is None:
            sub = Subscription(run, ra)
            self.subs[key] = sub
            sub.listener = self._listener(sub)
            ra.listeners.append(sub.listener)
        elif not keep_seq:
            sub.last_seq = -1  # a (re)claim redelivers the outstanding envelope
        sub.ended_sent = False if not run.is_ended else sub.ended_sent
        self.woken[sub] = None
        return sub

    def _listener(self, sub: Subscription) -> Any:
        """What the agent calls when it changes: the sender learns of it in the same task, with no task of
        its own per subscription to wake first (one task switch per woken agent per batch less)."""

        def woke() -> None:
            self.woken[sub] = None
            self._poke()

        return woke

    def _poke(self) -> None:
        self.wake.set()
        self.wake = trio.Event()

    async def _sender(self) -> None:
        while True:
            wake = self.wake
            await self._flush()
            if self.manager.restarts != self.restarts:  # after what was due and a reply being sent (it holds the lock)
                async with self.send_lock:
                    await self.peer.close(1012, "the server restarted (an injected fault: restart); reconnect and "
                                                "claim again with your lease")
                    if self.nursery is not None:
                        self.nursery.cancel_scope.cancel()  # the session is over: serve() returns
                return
            await wake.wait()

    async def _flush(self) -> None:
        """Send what changed for the agents that woke since the last flush (O(woken), not O(subscribed)).

        What leaves in one flush leaves in one frame where it can: several envelopes in one ``observations``
        frame, and the outcomes that changed ride in it (``outcomes``) instead of a frame of their own; only
        outcomes with no envelope to ride on get an ``outcome``/``outcomes`` frame. A frame is a socket write,
        and writes were most of the server's time per decision (bench/RESULTS.md). Each envelope is built
        for the parts its subscription asked for and serialized once (``WireEnvelope.shaped``).
        """
        if self.outbox and not self.woken:
            # a reply alone: let the run task, woken by the same request, publish what it set off first,
            # so both leave in one frame (one scheduling round; the listener fills `woken` meanwhile)
            await trio.lowlevel.checkpoint()
        woken, self.woken = self.woken, {}
        if self._rescan_all:  # a (re)claim or subscribe: look at everything once
            self._rescan_all = False
            woken = dict.fromkeys(self.subs.values())
        envelopes: list[dict[str, Any]] = []
        outcomes: list[dict[str, Any]] = []
        statuses: list[dict[str, Any]] = []
        results: dict[str, Any] = {}  # an ended run's result, once per flush (its view is O(agents))
        first_run = ""
        # Pipelined: many envelopes leave in a few frames, each sent as soon as it is built, so that the client
        # decodes and answers the first while the server builds the next (two processes, two cores: a batch
        # then costs about the larger of the two sides' work, not their sum). bench/RESULTS.md, issue 30.
        pipelined = self.batched_frames
        size = max(PIPELINE_MIN, -(-len(woken) // PIPELINE_FRAMES))
        left, weight = len(woken), 0
        for sub in woken:
            left -= 1
            if self.subs.get((sub.run.run_id, sub.agent.agent_id)) is not sub:
                continue  # released since it woke
            run, ra = sub.run, sub.agent
            env = current_wire(ra, sub.last_seq)
            if env is not None and (ra.lease is not None and ra.lease.live()):
                sub.last_seq = env.seq
                first_run = first_run or run.run_id
                shaped, nbytes = env.shaped_sized(sub.parts)
                weight += nbytes
                envelopes.append({"agent_id": ra.agent_id, "seq": env.seq, "envelope": shaped})
            if sub.outcomes:
                outcomes += [{"run_id": run.run_id, "agent_id": ra.agent_id, "seq": sub.last_seq, "receipt": wire}
                             for wire in agent_ops.changed_receipts(run, ra, sub.outcomes)]
            if run.is_ended and not sub.ended_sent:
                sub.ended_sent = True
                statuses.append(_note("run.status", {"run_id": run.run_id, "agent_id": ra.agent_id,
                                                     "seq": sub.last_seq, "status": run.status,
                                                     "detail": _result_of(run, results)}))
            # a frame's worth (envelopes that cost their building: small ones cost less than another frame), and
            # enough left for another
            if pipelined and len(envelopes) >= size and weight >= PIPELINE_BYTES and left >= PIPELINE_MIN:
                out, self.outbox = self.outbox, []
                await self._send_all([*out, _envelopes_note(envelopes, first_run, outcomes)])
                envelopes, outcomes, first_run, weight = [], [], "", 0
        out, self.outbox = self.outbox, []
        if envelopes:
            out.append(_envelopes_note(envelopes, first_run, outcomes))
        elif len(outcomes) == 1:
            out.append(_note("outcome", outcomes[0]))
        elif outcomes:
            out.append(_note("outcomes", {"outcomes": outcomes}))
        out += statuses
        await self._send_all(out)

    async def _send_all(self, out: list[dict[str, Any]]) -> None:
        """``out`` in one frame (batched frames) or a frame each."""
        if self.batched_frames and len(out) > 1:
            await self.send(out)
        else:
            for message in out:
                await self.send(message)

    async def _heartbeat(self) -> None:
        """Ping the peer every interval; drop it after three intervals of silence (leases live on).

        The interval is in real seconds under any ``--rate`` (as ``capabilities.heartbeat_s`` says, and as the
        body timeout is): a heartbeat tests the network and the peer's process, which run in real time. On the
        rated clock a 15 s interval was 0.15 s at rate 100, and a client busy for half a second (a policy
        thinking, a loaded machine) lost its connection, and with it a fresh claim in flight, whose retry then
        met its own lease (409)."""
        interval = self.heartbeat_s * self.manager.config.rate  # real seconds, on the process's (rated) clock
        while True:
            await trio.sleep(interval)
            if trio.current_time() - self.last_heard > 3 * interval:
                await self.peer.close(1001, "no message for three heartbeat intervals")
                raise Dropped()
            self.server_ping += 1
            await self.send({"jsonrpc": "2.0", "id": f"s-{self.server_ping}", "method": "ping",
                             "params": {"origin_ns": _clock_ns()}})


def _clock_ns() -> int:
    """The server's clock sample for heartbeats: the trio clock (warped under --rate), in ns."""
    return int(trio.current_time() * 1e9)


def _unlisten(sub: Subscription) -> None:
    if sub.listener in sub.agent.listeners:
        sub.agent.listeners.remove(sub.listener)


def _result_of(run: Any, results: dict[str, Any]) -> Any:
    """An ended run's ``result``, built once per flush: each of a run's agents gets its ``run.status`` in the same
    flush, and the run's view (every agent's line) was built again for each of them."""
    if run.run_id not in results:
        results[run.run_id] = run.view()["result"]
    return results[run.run_id]


def _envelopes_note(envelopes: list[dict[str, Any]], first_run: str, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """An ``observation`` notification for one envelope, ``observations`` for several; the outcomes ride in it."""
    if len(envelopes) == 1:
        params: dict[str, Any] = {"run_id": first_run, **envelopes[0]}
        method = "observation"
    else:
        params, method = {"envelopes": envelopes}, "observations"
    if outcomes:
        params["outcomes"] = outcomes
    return _note(method, params)


def _note(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}


METHODS = {
    "initialize": AgentSession.m_initialize,
    "ping": AgentSession.m_ping,
    "agent.claim": AgentSession.m_claim,
    "agent.release": AgentSession.m_release,
    "agent.briefing": AgentSession.m_briefing,
    "agent.subscribe": AgentSession.m_subscribe,
    "agent.submit": AgentSession.m_submit,
    "agent.submit_many": AgentSession.m_submit_many,
    "agent.receipt": AgentSession.m_receipt,
}


def refused_protocol(headers: Any) -> str | None:
    """Why a connection's ``X-Warren-Protocol`` is refused (closed with 1002 before the handshake), or None."""
    sent = headers.get(PROTOCOL_HEADER)
    if sent is not None and sent.strip() != PROTOCOL_VERSION:
        return f"this server speaks {PROTOCOL_VERSION}, not {sent}{case_hint(sent)}"
    return None


class CloseConnection(Exception):
    """A fault closes the connection (``reset``, ``disconnect``) before its request is served."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


#: JSON-RPC methods -> the request kinds of docs/faults.md (agent.submit_many names several agents: no fault)
FAULT_KINDS = {"agent.claim": "claim", "agent.release": "release", "agent.briefing": "briefing",
               "agent.subscribe": "poll", "agent.submit": "submit", "agent.receipt": "receipt"}


class Dropped(Exception):
    """The peer fell silent; ends the session (the heartbeat closed the connection with 1001)."""
