"""Agent routes over HTTP long-polling: claim, release, briefing, observations, commands, receipts.

Every route but the claims authenticates the ``?lease=`` token first (which refreshes its TTL); the lease
rules live in :mod:`warren_sim.runtime.leases`, the verdicts in :mod:`warren_sim.protocol.verdicts`.

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

import attrs
import orjson
from quart import Response, request

from ..protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_VERSION
from ..protocol.converter import WireError, converter, structure_or_error
from ..protocol.models import BulkClaim, MultiPoll, Receipt
from ..runtime.api import RunAPI
from ..runtime.errors import RunError
from ..runtime.leases import RemoteAgent
from ..runtime.views import WHOLE
from .agent_ws import PARTS
from .replies import BadRequest, float_arg, int_arg, json_body, problem_body, reply
from .state import AppState, WarrenApp

__all__ = ["HotReply", "poll_observation", "register_agent_routes", "submit_command"]


@attrs.frozen
class HotReply:
    """What a hot agent route answers, before any framework wraps it: Quart's routes turn it into a ``Response``,
    the HTTP lane (:mod:`.http_lane`) writes it straight to the ASGI server. A refusal is raised (``RunError``,
    ``BadRequest``) and answered by the error handlers, the same in both."""

    status: int  # 200 (JSON), 204 (nothing came in time: no body) or 422 (problem+json)
    body: bytes = b""
    content_type: str = "application/json"


NO_CONTENT = HotReply(204)


def _hot_response(out: HotReply) -> Response:
    if out.status == 204:
        return Response("", status=204)
    return Response(out.body, status=out.status, content_type=out.content_type)


def _fast_reply(obj: Any) -> Response:
    """A JSON reply serialized by orjson: the hot replies (envelopes, receipts, batches of envelopes) are plain
    JSON types, and orjson makes them 5-10x cheaper than ``json.dumps`` (same JSON, compact separators)."""
    return Response(orjson.dumps(obj), status=200, content_type="application/json")


def _lease() -> str | None:
    return request.args.get("lease")


def _check_protocol_arg() -> None:
    asked = request.args.get("protocol")
    if asked is not None and asked != PROTOCOL_VERSION:
        raise RunError(409, f"this server speaks {PROTOCOL_VERSION}, the claim asked for protocol={asked!r}")


async def _next_envelope(run: RunAPI, ra: RemoteAgent, receipt: Receipt,
                         wait: float) -> orjson.Fragment | None:
    """After an accepted (or duplicate) command: the agent's next envelope, waited for up to ``wait`` s.

    None when the verdict was not an acceptance (the observation is still the agent's to answer, or a newer
    one is: a poll says which), when nothing came in time, or when the run ended meanwhile: the receipt must
    leave whatever happens, so a 410 or a full poll slot becomes null and the client polls as usual.
    """
    if receipt.status not in ("accepted", "duplicate"):
        return None
    record = ra.ledger.observations.get(receipt.observation_id)
    if record is None:
        return None
    try:
        return await run.wait_observation(ra, record.seq, wait)
    except RunError:
        return None


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
        if run.is_ended:
            raise RunError(410, f"{run_id} has ended with status {run.status}; it cannot be claimed")
        leases = run.claim_many(selector)
        return reply({"leases": leases, "briefing_revision": 1})

    @app.route("/v1/runs/<run_id>/observations", methods=["POST"])
    async def observations_many(run_id: str) -> Response:
        run = runs().get(run_id)
        wait = min(float_arg("wait", 0.0), config.max_wait_s)
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
        wanted = [(run.authenticate(aid, token), poll.after.get(aid, -1)) for aid, token in poll.leases.items()]
        if run.is_ended:
            raise RunError(410, f"{run_id} has ended with status {run.status}; there will be no more observations")
        shape = parts or WHOLE
        envs = await run.wait_observations(wanted, wait, shape)  # serialized there, one poll at a time
        if not envs:
            return Response("", status=204)
        # each envelope serialized once (in that shape), whoever else receives it
        return _fast_reply({"observations": [env.shaped(shape) for env in envs]})

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/claim", methods=["POST"])
    async def claim(run_id: str, agent_id: str) -> Response:
        _check_protocol_arg()
        run = runs().get(run_id)
        token, _ = run.claim(agent_id, _lease())
        return reply({"lease": token, "briefing_revision": 1})

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/release", methods=["POST"])
    async def release(run_id: str, agent_id: str) -> Response:
        runs().get(run_id).release(agent_id, _lease())
        return reply({"agent_id": agent_id, "released": True})

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/briefing", methods=["GET"])
    async def get_briefing(run_id: str, agent_id: str) -> Response:
        run = runs().get(run_id)
        run.authenticate(agent_id, _lease())
        return reply(run.briefing_for(agent_id))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/observations", methods=["GET"])
    async def observations(run_id: str, agent_id: str) -> Response:
        return _hot_response(await poll_observation(app.warren, run_id, agent_id, request.args))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/commands", methods=["POST"])
    async def submit(run_id: str, agent_id: str) -> Response:
        return _hot_response(await submit_command(app.warren, run_id, agent_id, request.args,
                                                  lambda: json_body(required=True)))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/commands/<command_id>", methods=["GET"])
    async def get_receipt(run_id: str, agent_id: str, command_id: str) -> Response:
        run = runs().get(run_id)
        ra = run.authenticate(agent_id, _lease())
        return reply(converter.unstructure(run.receipt(ra, command_id)))


# -- the two hot routes: one function each, served by Quart's routes above and by the HTTP lane -----------------
async def poll_observation(state: AppState, run_id: str, agent_id: str, args: Mapping[str, str],
                           deliver: Callable[[bytes], bool] | None = None) -> HotReply:
    """``GET .../agents/{agent}/observations?after=&wait=&lease=``: the agent's next envelope, long-polled.

    ``deliver``: the HTTP lane's early writer (``Run.wait_observation``); the reply is the same either way."""
    run = state.runs().get(run_id)
    after = int_arg("after", -1, minimum=-1, args=args)
    wait = min(float_arg("wait", 0.0, args), state.config.max_wait_s)
    # every agent's last poll of an ended run: 410 from the stored status, no rebuild (a live run: None)
    gone = run.ended_poll(agent_id, args.get("lease"), state.config.lease_ttl, state.config.max_polls_per_lease)
    if gone is not None:
        raise gone
    ra = run.authenticate(agent_id, args.get("lease"))
    env = await run.wait_observation(ra, after, wait, deliver)
    if env is None:
        return NO_CONTENT
    return HotReply(200, orjson.dumps(env))


async def submit_command(state: AppState, run_id: str, agent_id: str, args: Mapping[str, str],
                         read_body: Callable[[], Awaitable[Any]]) -> HotReply:
    """``POST .../agents/{agent}/commands?lease=[&wait=]``: judge a command; with ``wait``, the receipt carries the
    agent's next envelope. ``read_body``: the request's body as strict JSON (read after the lease is checked)."""
    run = state.runs().get(run_id)
    wait = None if "wait" not in args else min(float_arg("wait", 0.0, args), state.config.max_wait_s)
    lease = args.get("lease")
    ra = run.authenticate(agent_id, lease)
    body = await read_body()
    judgement = run.submit(ra, body, lease)
    if judgement.accept:
        await run.journal.durable()  # --fsync: on disk before the receipt leaves (one fsync per tick)
    receipt = judgement.receipt
    if receipt is None:
        return HotReply(422, problem_body(422, judgement.problem_detail).encode(), PROBLEM_CONTENT_TYPE)
    if wait is None:
        return HotReply(200, orjson.dumps(converter.unstructure(receipt)))
    env = await _next_envelope(run, ra, receipt, wait)
    if env is not None and receipt.status == "accepted":
        receipt = run.receipt(ra, receipt.command_id)  # the batch was adjudicated: its outcome is known
    out = converter.unstructure(receipt)
    out["next_observation"] = env
    return HotReply(200, orjson.dumps(out))
