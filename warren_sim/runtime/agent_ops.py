"""The agent operations of warren-agent/0: one function per request kind, whatever transport carried it.

Three transports carry an agent's requests: the HTTP lane (:mod:`warren_sim.http.http_lane`: the two hot routes
straight from ASGI), Quart's routes (:mod:`warren_sim.http.agent_routes`: every agent route, the hot ones when the
lane hands them over) and the JSON-RPC methods of ``WS /v1/agent`` (:mod:`warren_sim.http.agent_ws`). Each reads
its own framing (a path and a query, a JSON body, JSON-RPC params) into the inputs of one function below, and
turns its result, or the :class:`~.errors.RunError` it raises, back into its own framing (a reply or a
problem+json body; a JSON-RPC result or error). What a request does, and the words it is refused with, are
decided here and nowhere else:

==========================================  ==================================  ===================================
function                                    HTTP                                JSON-RPC
==========================================  ==================================  ===================================
:func:`claim`                               ``POST .../agents/{a}/claim``       ``agent.claim``
:func:`claim_many`                          ``POST /v1/runs/{r}/claim``         (none)
:func:`release`                             ``POST .../agents/{a}/release``     ``agent.release``
:func:`briefing`                            ``GET .../agents/{a}/briefing``     ``agent.briefing``
:func:`poll`                                ``GET .../agents/{a}/observations``  (pushed after ``agent.subscribe``)
:func:`poll_many`                           ``POST /v1/runs/{r}/observations``  (none)
:func:`subscribe`                           (none)                              ``agent.subscribe``
:func:`authenticate`, then :func:`submit`   ``POST .../agents/{a}/commands``    ``agent.submit(_many)``
:func:`next_observation`                    ``POST .../commands?wait=``         (pushed)
:func:`receipt`                             ``GET .../commands/{c}``            ``agent.receipt``
:func:`changed_receipts`                    (none)                              (pushed: ``outcome(s)``)
==========================================  ==================================  ===================================

**Add a hook here.** Metrics, tracing and fault injection for agent requests belong at the top of these
functions: every agent request of every transport passes exactly one of them for its kind (a command passes
:func:`authenticate` and then :func:`submit`: its body is read between the two, and only for a lease holder),
and nothing else does. A transport never reaches past them into the run for a request.

What stays with the transports: the run's lookup (``RunManager.get``, whose 404 comes first), their own input
checks (a query parameter that is not a number, a JSON-RPC param that is not a string: 400 and -32602 are the
transport's words), the protocol check, and the shape of the reply (HTTP's ``next_observation`` member, the
JSON-RPC subscriptions). What the WebSocket pushes after a request is delivery, not a request: its session
frames the envelopes and ``run.status`` itself, and asks :func:`changed_receipts` for the receipts whose outcome
changed (the engine's outcomes are read here, not in the HTTP layer).

Cost: these are plain calls on the run's public methods, each the request's own work and nothing more: no object
is made per request here (the hot paths, a poll and a command, are the bulk of a server's requests).

**Observability** (docs/operations.md): each function takes ``via``, the transport that carried the request and
the caller's W3C trace context (:data:`HTTP` and :data:`WS` when there is none: no object per request). With
tracing on, each request is a span of its kind (``warren.claim``, ``warren.poll``, ``warren.submit``, ...)
continuing ``via.traceparent``, with the run, the agent, the observation id and the verdict; every judged command
is counted by verdict and transport (``warren_decisions_total``). The run carries the app's metrics and tracer
(``run.metrics``, ``run.tracer``, set by the manager); off, a span is a shared do-nothing object. A request's
latency is timed by its transport, which alone sees its whole life (reading, framing, writing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import orjson

from ..observability.logs import LogEvent
from ..observability.tracing import NULL_SPAN
from ..protocol.converter import converter
from ..protocol.models import ControlledAgents, Receipt
from ..protocol.verdicts import Judgement
from .api import RunAPI
from .errors import CANNOT_CLAIM, NO_MORE_OBSERVATIONS, RunError, run_ended
from .faults import Fault
from .leases import RemoteAgent, proposal_ok
from .manager import RunManager, ServerConfig
from .run import Run
from .views import WireEnvelope

__all__ = ["BRIEFING_REVISION", "HTTP", "WS", "Via", "authenticate", "briefing", "changed_receipts", "claim",
           "claim_many", "claim_retriable", "fault", "next_observation", "poll", "poll_many", "receipt", "release",
           "submit", "subscribe"]

AnyRun = RunAPI  # a live run or a stored one: both answer every operation (runtime.api)
BRIEFING_REVISION = 1  # what a claim's reply names: the briefing an agent gets does not change during a run


@attrs.frozen
class Via:
    """The transport that carried a request (``http``, ``ws``) and the caller's W3C trace context, if it sent one."""

    transport: str
    traceparent: str | None = None
    tracestate: str | None = None


HTTP = Via("http")
WS = Via("ws")

_AGENT = "/v1/runs/<run_id>/agents/<agent_id>"
# each kind's HTTP route (as Quart names it, the metrics' route label too) and JSON-RPC method: the spans' names
ROUTES = {
    ("claim", "http"): f"POST {_AGENT}/claim", ("claim", "ws"): "agent.claim",
    ("claim_many", "http"): "POST /v1/runs/<run_id>/claim",
    ("release", "http"): f"POST {_AGENT}/release", ("release", "ws"): "agent.release",
    ("briefing", "http"): f"GET {_AGENT}/briefing", ("briefing", "ws"): "agent.briefing",
    ("poll", "http"): f"GET {_AGENT}/observations",
    ("poll_many", "http"): "POST /v1/runs/<run_id>/observations",
    ("subscribe", "ws"): "agent.subscribe",
    ("submit", "http"): f"POST {_AGENT}/commands", ("submit", "ws"): "agent.submit",
    ("receipt", "http"): f"GET {_AGENT}/commands/<command_id>", ("receipt", "ws"): "agent.receipt",
}


def _span(run: AnyRun, kind: str, via: Via, agent_id: str | None = None) -> Any:
    """The request's span (the shared do-nothing one unless tracing is on)."""
    tracer = run.tracer
    if not tracer.enabled:
        return NULL_SPAN
    return tracer.request(kind, via.transport, ROUTES.get((kind, via.transport), kind), via.traceparent,
                          run.run_id, agent_id, via.tracestate)


def claim(run: AnyRun, agent_id: str, lease: str | None, via: Via = HTTP,
          proposed: str | None = None) -> tuple[str, bool]:
    """Claim ``agent_id`` (a fresh lease, or ``lease`` resumed; ``proposed``: the token a fresh lease gets, which
    makes the claim safe to send again): ``(token, resumed)``; 410 once the run ended."""
    with _span(run, "claim", via, agent_id):
        return run.claim(agent_id, lease, proposed)


def claim_many(run: AnyRun, selector: ControlledAgents, via: Via = HTTP) -> dict[str, str]:
    """Fresh leases on the agents ``selector`` names (ids, ``"all"``, ``{"role": ROLE}``), all or none."""
    with _span(run, "claim_many", via):
        if run.is_ended:
            raise run_ended(run.run_id, run.status, CANNOT_CLAIM)
        return run.claim_many(selector)


def release(run: AnyRun, agent_id: str, lease: str | None, via: Via = HTTP) -> None:
    """Give ``agent_id`` back (its lease ends; the run goes on, its observations no-op'd at their deadlines)."""
    with _span(run, "release", via, agent_id):
        run.release(agent_id, lease)


def briefing(run: AnyRun, agent_id: str, lease: str | None, via: Via = HTTP) -> dict[str, Any]:
    """The agent's briefing (its role, tools and objectives), for the holder of its lease."""
    with _span(run, "briefing", via, agent_id):
        run.authenticate(agent_id, lease)
        return run.briefing_for(agent_id)


async def poll(run: AnyRun, agent_id: str, lease: str | None, after: int, wait: float, config: ServerConfig,
               deliver: Callable[[bytes], bool] | None = None, via: Via = HTTP) -> orjson.Fragment | None:
    """The agent's next envelope (``seq > after``), waited for up to ``wait`` s (capped by ``max_wait_s``, and by the
    run at 0.9 x the lease TTL, the lease held meanwhile: ``leases.poll_wait``, ``leases.poll_slot``); None when
    nothing came in time.

    An ended stored run answers a plain poll's 410 from its stored status, without being rebuilt from its journal
    (every agent's last poll lands there). ``deliver``: the HTTP lane's early writer (``Run.wait_observation``).
    """
    with _span(run, "poll", via, agent_id) as span:
        gone = run.ended_poll(agent_id, lease, config.lease_ttl, config.max_polls_per_lease)  # a live run: None
        if gone is not None:
            raise gone
        ra = run.authenticate(agent_id, lease)
        env = await run.wait_observation(ra, after, min(wait, config.max_wait_s), deliver)
        if env is not None and span is not NULL_SPAN and ra.envelope is not None:
            span.set("observation_id", ra.envelope.obs.observation_id)
        return env


async def poll_many(run: AnyRun, leases: Mapping[str, str], after: Mapping[str, int], wait: float,
                    parts: tuple[str, ...], config: ServerConfig, via: Via = HTTP) -> list[WireEnvelope]:
    """Several agents' next envelopes (each after its own ``after``, -1 when absent), waited for up to ``wait`` s
    for at least one; ``[]`` when none came. Each agent is named with its own lease; each envelope is serialized in
    the shape ``parts`` before this returns (``Run.wait_observations``)."""
    with _span(run, "poll_many", via):
        wanted = [(run.authenticate(aid, token), after.get(aid, -1)) for aid, token in leases.items()]
        if run.is_ended:
            raise run_ended(run.run_id, run.status, NO_MORE_OBSERVATIONS)
        return await run.wait_observations(wanted, min(wait, config.max_wait_s), parts)


def subscribe(run: AnyRun, agent_id: str, lease: str | None, via: Via = WS) -> RemoteAgent:
    """The agent whose envelopes a connection is to receive as they come, for the holder of its lease."""
    with _span(run, "subscribe", via, agent_id):
        ra = run.authenticate(agent_id, lease)
        if run.is_ended:
            raise run_ended(run.run_id, run.status, NO_MORE_OBSERVATIONS)
        return ra


def authenticate(run: AnyRun, agent_id: str, lease: str | None) -> RemoteAgent:
    """The agent a command is for, its lease checked (and its TTL refreshed): before the command's body is read."""
    return run.authenticate(agent_id, lease)


def submit(run: AnyRun, ra: RemoteAgent, command: object, lease: str | None, *, write: bool = True,
           via: Via = HTTP) -> Judgement:
    """Judge ``command`` for ``ra`` (from :func:`authenticate`): the judgement, whose receipt is never None; a body
    that cannot be judged (no ``command_id``, no ``observation_id``) is refused with 422.

    ``write=False``: the accepted verdict's write is the caller's (``journal.write_through()`` before any receipt
    leaves: ``agent.submit_many`` writes once for all its commands). An accepted command is on the OS's side once
    this returns; durable (``--fsync``) once the caller awaited ``run.journal.durable()``.
    """
    with _span(run, "submit", via, ra.agent_id) as span:
        judgement = run.submit(ra, command, lease, write=write)
        receipt = judgement.receipt
        if receipt is None:
            raise RunError(422, judgement.problem_detail)
        run.metrics.decision(receipt.status, via.transport)
        if span is not NULL_SPAN:
            span.set("verdict", receipt.status)
            span.set("observation_id", receipt.observation_id)
            span.set("command_id", receipt.command_id)
        return judgement


async def next_observation(run: AnyRun, ra: RemoteAgent, receipt: Receipt, wait: float,
                           config: ServerConfig) -> tuple[orjson.Fragment | None, Receipt]:
    """After a command: the agent's next envelope, waited for up to ``wait`` s (capped by ``max_wait_s``), and the
    receipt to send with it (its outcome known once the batch it rode in was adjudicated).

    The envelope is None when the verdict was not an acceptance (the observation is still the agent's to answer,
    or a newer one is: a poll says which), when nothing came in time, or when the run ended meanwhile: the receipt
    must leave whatever happens, so a 410 or a full poll slot becomes null and the client polls as usual.
    """
    if receipt.status not in ("accepted", "duplicate"):
        return None, receipt
    record = ra.ledger.observations.get(receipt.observation_id)
    if record is None:
        return None, receipt
    try:
        env = await run.wait_observation(ra, record.seq, min(wait, config.max_wait_s))
    except RunError:
        return None, receipt
    if env is not None and receipt.status == "accepted":
        receipt = run.receipt(ra, receipt.command_id)  # the batch was adjudicated: its outcome is known
    return env, receipt


def receipt(run: AnyRun, agent_id: str, lease: str | None, command_id: str, via: Via = HTTP) -> Receipt:
    """The receipt of a command the agent submitted, with its outcome as it stands; 404 for one never submitted."""
    with _span(run, "receipt", via, agent_id) as span:
        ra = run.authenticate(agent_id, lease)
        found = run.receipt(ra, command_id)
        if span is not NULL_SPAN:
            span.set("command_id", command_id)
            span.set("observation_id", found.observation_id)
            span.set("verdict", found.status)
        return found


# -- faults (docs/faults.md): which request meets one, decided here for every transport ---------------------------
def fault(manager: RunManager, run_id: str, agent_id: str, kind: str, *, websocket: bool = False,
          retriable: bool = True) -> Fault | None:
    """The fault this request of ``agent_id`` meets, if any (:mod:`.faults`: a pure function of the seed, the
    run, the agent, ``kind`` and the request's index), journaled as a runtime record; an ``expire`` is done here
    (the lease ends before the request is judged). What a fault does to the wire is the transport's:
    :mod:`warren_sim.http.fault_lane`, and the JSON-RPC session of :mod:`warren_sim.http.agent_ws`."""
    met = manager.faults.decide(run_id, agent_id, kind, websocket=websocket, retriable=retriable)
    if met is None:
        return None
    run = manager.runs.get(run_id)
    if run is not None and not run.is_ended and isinstance(run, Run):
        record = met.record()
        run.journal.append(record)
        run.journal.write_through()  # on the OS's side at once, as a verdict; readers see it with the batch
        manager.say(LogEvent("fault", f"fault {met.fault}: {agent_id}'s {kind} #{met.index} in {run_id}",
                             {"run_id": run_id, **{k: v for k, v in record.items() if k != "kind"}}))
        met_so_far = run.state.faults_met
        met_so_far[met.fault] = met_so_far.get(met.fault, 0) + 1
        if met.fault == "expire":
            ra = run.remote.get(agent_id)
            if ra is not None and ra.lease is not None:
                ra.lease.expire()
        elif met.fault == "restart":  # every live run rebuilt from its file; this request then reaches the new one
            manager.restart_runs()
    return met


def claim_retriable(manager: RunManager, run_id: str, agent_id: str, token: str | None,
                    proposed: str | None = None) -> bool:
    """Whether a claim can be sent again to the same effect: it proposes its lease's token (``proposed_lease``), or
    ``token`` resumes the agent's live lease. Only such a claim may lose its reply (a ``lost_reply``): a client
    cannot learn a fresh token the server made if the reply that carried it was lost."""
    if proposal_ok(proposed):
        return True
    if not token:
        return False
    run = manager.runs.get(run_id)
    ra = run.remote.get(agent_id) if isinstance(run, Run) else None
    lease = None if ra is None else ra.lease
    return lease is not None and lease.live() and lease.matches(token)


# -- what a JSON-RPC subscription is pushed after a command: its receipt, each time the outcome changes ----------
def changed_receipts(run: AnyRun, ra: RemoteAgent, tracked: dict[str, str]) -> list[dict[str, Any]]:
    """The wire receipts of the ``tracked`` commands of ``ra`` (command id -> the outcome last sent) whose outcome
    changed since; ``tracked`` is updated, and forgets the commands whose outcome is final.

    Final: ``rejected``, ``completed``, ``interrupted``, and ``accepted`` once no lane of the agent holds an
    action of that command (a sleep, a noop, an instant tool: nothing will change it). Without that last
    case every sleep stayed tracked for the rest of the run and each wake walked them all: O(decisions so
    far) per batch, most of a one-agent echo run's server time (bench/results/r4-perf-wire.md).
    """
    sim = run.sim
    out = []
    for cid, sent in list(tracked.items()):
        # Compare the engine's outcome first: building a receipt for every tracked command on
        # every wake was a third of the server's CPU per decision (bench/out/ws_profile_server.txt).
        oid = ra.observation_of_command.get(cid)
        now = sim.outcome_of(oid)[0] if oid is not None else None
        if now is None or now != sent:
            wire = _receipt_wire(run, ra, cid, oid)
            now = wire["outcome"]
            if now != sent:
                tracked[cid] = now
                out.append(wire)
        if now in ("rejected", "completed", "interrupted") or (now == "accepted" and oid is not None
                                                                and not _holds(sim, ra.agent_id, oid)):
            del tracked[cid]
    return out


def _receipt_wire(run: AnyRun, ra: RemoteAgent, command_id: str, observation_id: str | None) -> dict[str, Any]:
    """The receipt of a tracked command as the wire has it (``converter.unstructure(run.receipt(...))``).

    An accepted command with no conflict (nearly all of them) is written straight from its verdict and the
    engine's outcome: building the receipt (``attrs.evolve`` and its validators) and unstructuring it was a
    tenth of the server's CPU per decision at 64 agents (bench/results/r4-perf-wire.md);
    tests/test_protocol_transports.py checks the two agree.
    """
    original = ra.ledger.accepted.get(command_id)
    if original is not None and observation_id is not None and run.sim.conflict_of(observation_id) is None:
        outcome, reason = run.sim.outcome_of(observation_id)
        return {"command_id": original.command_id, "observation_id": original.observation_id,
                "status": original.status, "detail": original.detail, "outcome": outcome,
                "outcome_reason": reason, "conflict": None}
    wire: dict[str, Any] = converter.unstructure(run.receipt(ra, command_id))
    return wire


def _holds(sim: Any, agent_id: str, observation_id: str) -> bool:
    """Whether a lane of the agent holds the action of the command that answered ``observation_id`` (a
    durative action under way, whose outcome will still change to completed or interrupted)."""
    agent = sim.world.agents.get(agent_id)
    if agent is None:
        return False
    return any(a is not None and a.observation_id == observation_id for a in agent.lanes.values())
