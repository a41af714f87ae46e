"""Agent routes over HTTP long-polling: claim, release, briefing, observations, commands, receipts.

Every route but ``claim`` authenticates the ``?lease=`` token first (which refreshes its TTL); the lease
rules live in :mod:`warren_sim.runtime.leases`, the verdicts in :mod:`warren_sim.protocol.verdicts`.
"""

from __future__ import annotations

from quart import Response, request

from ..protocol import PROTOCOL_VERSION
from ..protocol.converter import converter
from ..runtime.errors import RunError
from .replies import float_arg, int_arg, json_body, problem_reply, reply
from .state import WarrenApp

__all__ = ["register_agent_routes"]


def _lease() -> str | None:
    return request.args.get("lease")


def register_agent_routes(app: WarrenApp) -> None:
    runs = app.warren.runs
    config = app.warren.config

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/claim", methods=["POST"])
    async def claim(run_id: str, agent_id: str) -> Response:
        asked = request.args.get("protocol")
        if asked is not None and asked != PROTOCOL_VERSION:
            raise RunError(409, f"this server speaks {PROTOCOL_VERSION}, the claim asked for protocol={asked!r}")
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
        run = runs().get(run_id)
        after = int_arg("after", -1, minimum=-1)
        wait = min(float_arg("wait", 0.0), config.max_wait_s)
        ra = run.authenticate(agent_id, _lease())
        env = await run.wait_observation(ra, after, wait)
        if env is None:
            return Response("", status=204)
        return reply(env)

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/commands", methods=["POST"])
    async def submit(run_id: str, agent_id: str) -> Response:
        run = runs().get(run_id)
        ra = run.authenticate(agent_id, _lease())
        body = await json_body(required=True)
        judgement = run.submit(ra, body)
        if judgement.receipt is None:
            return problem_reply(422, judgement.problem_detail)
        return reply(converter.unstructure(judgement.receipt))

    @app.route("/v1/runs/<run_id>/agents/<agent_id>/commands/<command_id>", methods=["GET"])
    async def get_receipt(run_id: str, agent_id: str, command_id: str) -> Response:
        run = runs().get(run_id)
        ra = run.authenticate(agent_id, _lease())
        return reply(converter.unstructure(run.receipt(ra, command_id)))
