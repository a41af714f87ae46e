"""Agent routes over HTTP long-polling: claim, release, briefing, observations, commands, receipts.

Each route reads its request (path, query, JSON body) into the inputs of one agent operation
(:mod:`warren_sim.runtime.agent_ops`, the same functions the JSON-RPC methods call) and writes what it returns.
Every route but the claims authenticates the ``?lease=`` token first (which refreshes its TTL); the lease
rules live in :mod:`warren_sim.runtime.leases`, the verdicts in :mod:`warren_sim.protocol.verdicts`.

The two hot routes, a poll and a command, are one function each (:func:`poll_observation`,
:func:`submit_command`): Quart's routes below call them, and so does the HTTP lane (:mod:`.http_lane`), which
answers those routes in their plain form before Quart sees them.

Two extensions of warren-agent/0 cut requests, which is where HTTP's cost is (DESIGN section 12; both in
the schemas and the OpenAPI document, docs/client.md "Fewer requests"):

* ``POST /v1/runs/{run}/claim`` claims a selector's agents (ids, ``"all"``, ``{"role": ROLE}``) in one
  request, one fresh lease each;
* ``POST .../commands?wait=S`` answers with the receipt *and* the agent's next envelope
  (``next_observation``), waited for up to S seconds: one request per decision instead of two. Without
  ``wait`` the reply is the seed's receipt, unchanged;
* ``POST /v1/runs/{run}/observations?wait=S`` long-polls several agents at once (each with its own lease
  token, in the body): a client driving many agents holds one request, not one per agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from quart import Response, request

from ..protocol import PROTOCOL_VERSION, case_hint
from ..protocol.converter import WireError, converter, structure_or_error
from ..protocol.models import BulkClaim, MultiPoll
from ..runtime import agent_ops
from ..runtime.errors import RunError
from ..runtime.views import WHOLE
from .agent_ws import PARTS
from .replies import BadRequest, float_arg, int_arg, json_body, reply
from .state import AppState, WarrenApp

__all__ = ["poll_observation", "register_agent_routes", "submit_command", "via_of"]


def _hot_response(body: bytes | None) -> Response:
    """A hot route's reply as Quart's response: 200 with JSON ``body``, or 204 (nothing came in time) for None."""
    if body is None:
        return Response("", status=204)
    return Response(body, status=200, content_type="application/json")


def _lease() -> str | None:
    return request.args.get("lease")


def _check_protocol_arg() -> None:
    asked = request.args.get("protocol")
    if asked is not None and asked != PROTOCOL_VERSION:
        raise RunError(409, f"this server speaks {PROTOCOL_VERSION}, the claim asked for protocol={asked!r}"
                       + case_hint(asked))


def register_agent_routes(app: WarrenApp) -> None:
    runs = app.warren.runs
    config = app.warren.config

    @app.route("/v1/runs/<run_id>/claim", methods=["POST"])
    async def claim_many(run_id: str) -> Response:
        _check_protocol_arg()
        run = runs().get(run_id)
        body = await json_body(required=True)
        try:
            selector = structure_or_error(body, BulkClaim).agents
        except WireError as exc:
            raise BadRequest(400, f"{exc}; send {{\"agents\": \"all\"}}, {{\"agents\": {{\"role\": ROLE}}}} or "
                             '{"agents": [ids]}') from None
        leases = agent_ops.claim_many(run, selector, _via())
        return reply({"leases": leases, "briefing_revision": agent_ops.BRIEFING_REVISION})

    @app.route("/v1/runs/<run_id>/observations", methods=["POST"])
    async def observations_many(run_id: str) -> Response:
        run = runs().get(run_id)
        wait = float_arg("wait", 0.0)
        body = await json_body(required=True)
        try:
            poll = structure_or_error(body, MultiPoll)
        except WireError as exc:
            raise BadRequest(400, f'{exc}; send {{"leases": {{AGENT: TOKEN, ...}}, "after": {{AGENT: SEQ, ...}}}}') \
                from None
        if not poll.leases:
            raise BadRequest(400, "leases is empty; name each agent to poll with its lease token")
        stray = [aid for aid in poll.after if aid not in poll.leases]
        if stray:
            raise BadRequest(400, f"after names {', '.join(map(repr, stray[:10]))}, not in leases; give each "
                             "polled agent's lease in leases")
        low = [aid for aid, seq in poll.after.items() if seq < -1]
        if low:
            raise BadRequest(400, f"after of {low[0]!r} must be >= -1 (-1: nothing received yet)")
        parts = None if poll.parts is None else tuple(poll.parts)
        if parts is not None and (not parts or any(p not in PARTS for p in parts)):
            raise BadRequest(400, f"parts must be a non-empty list drawn from {', '.join(PARTS)}, got {poll.parts!r}; "
                             "leave it out for whole envelopes")
        shape = parts or WHOLE
        envs = await agent_ops.poll_many(run, poll.leases, poll.after, wait, shape, config, _via())
        if not envs:
            return Response("", status=204)
        # each envelope serialized once (in that shape), whoever else receives it; orjson: 5-10x json.dumps
        return Response(orjson.dumps({"observations": [env.shaped(shape) for env in envs]}), status=200,
                        content_type="application/json")

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/claim", methods=["POST"])
    async def claim(run_id: str, agent_id: str) -> Response:
        _check_protocol_arg()
        token, _ = agent_ops.claim(runs().get(run_id), agent_id, _lease(), _via(),
                                   request.args.get("proposed_lease"))
        return reply({"lease": token, "briefing_revision": agent_ops.BRIEFING_REVISION})

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/release", methods=["POST"])
    async def release(run_id: str, agent_id: str) -> Response:
        agent_ops.release(runs().get(run_id), agent_id, _lease(), _via())
        return reply({"agent_id": agent_id, "released": True})

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/briefing", methods=["GET"])
    async def get_briefing(run_id: str, agent_id: str) -> Response:
        return reply(agent_ops.briefing(runs().get(run_id), agent_id, _lease(), _via()))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/observations", methods=["GET"])
    async def observations(run_id: str, agent_id: str) -> Response:
        return _hot_response(await poll_observation(app.warren, run_id, agent_id, request.args, via=_via()))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/commands", methods=["POST"])
    async def submit(run_id: str, agent_id: str) -> Response:
        return _hot_response(await submit_command(app.warren, run_id, agent_id, request.args,
                                                  lambda: json_body(required=True), via=_via()))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/commands/<command_id>", methods=["GET"])
    async def get_receipt(run_id: str, agent_id: str, command_id: str) -> Response:
        return reply(converter.unstructure(agent_ops.receipt(runs().get(run_id), agent_id, _lease(), command_id,
                                                             _via())))

    def _via() -> agent_ops.Via:
        """The request's transport and trace context, for agent_ops (read only when tracing is on)."""
        if not app.warren.tracer.enabled:
            return agent_ops.HTTP
        return via_of(request.headers.get("traceparent"), request.headers.get("tracestate"))


# -- the two hot routes: one function each, served by Quart's routes above and by the HTTP lane -----------------
def via_of(traceparent: str | None, tracestate: str | None) -> agent_ops.Via:
    """An HTTP request's ``via``: the shared one when it carries no trace context."""
    if traceparent is None:
        return agent_ops.HTTP
    return agent_ops.Via("http", traceparent, tracestate)


async def poll_observation(state: AppState, run_id: str, agent_id: str, args: Mapping[str, str],
                           deliver: Callable[[bytes], bool] | None = None, *,
                           via: agent_ops.Via = agent_ops.HTTP) -> bytes | None:
    """``GET .../agents/{agent}/observations?after=&wait=&lease=``: the agent's next envelope (JSON), long-polled;
    None when nothing came in time (204). Refusals are raised, for the caller's error replies.

    ``deliver``: the HTTP lane's early writer (``Run.wait_observation``); the reply is the same either way."""
    run = state.runs().get(run_id)
    after = int_arg("after", -1, minimum=-1, args=args)
    wait = float_arg("wait", 0.0, args)
    env = await agent_ops.poll(run, agent_id, args.get("lease"), after, wait, state.config, deliver, via)
    return None if env is None else orjson.dumps(env)


async def submit_command(state: AppState, run_id: str, agent_id: str, args: Mapping[str, str],
                         read_body: Callable[[], Awaitable[Any]], *, via: agent_ops.Via = agent_ops.HTTP) -> bytes:
    """``POST .../agents/{agent}/commands?lease=[&wait=]``: judge a command; with ``wait``, the receipt carries the
    agent's next envelope. ``read_body``: the request's body as strict JSON (read after the lease is checked)."""
    run = state.runs().get(run_id)
    wait = None if "wait" not in args else float_arg("wait", 0.0, args)
    lease = args.get("lease")
    ra = agent_ops.authenticate(run, agent_id, lease)
    judgement = agent_ops.submit(run, ra, await read_body(), lease, via=via)
    if judgement.accept:
        await run.journal.durable()  # --fsync: on disk before the receipt leaves (one fsync per tick)
    receipt = judgement.receipt
    assert receipt is not None  # agent_ops.submit refuses a command without one (422)
    if wait is None:
        return orjson.dumps(converter.unstructure(receipt))
    env, receipt = await agent_ops.next_observation(run, ra, receipt, wait, state.config)
    out = converter.unstructure(receipt)
    out["next_observation"] = env
    return orjson.dumps(out)
