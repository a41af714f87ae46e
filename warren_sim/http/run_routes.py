"""Run routes: create, fork, list, view, start, cancel a run, and read its journal as flushed to disk.

Each route is one call on the run manager or a run; refusals are :class:`RunError` / :class:`BadRequest`
and become problem replies in :mod:`warren_sim.http.hooks`.
"""

from __future__ import annotations

import trio
from quart import Response, request

from ..protocol.converter import WireError, structure_or_error
from ..protocol.models import RunCreate, RunFork
from ..runtime.errors import run_ended
from ..runtime.stored import journal_text_of
from ..scenarios import list_scenarios
from .replies import BadRequest, int_arg, json_body, reply
from .state import WarrenApp

__all__ = ["register_run_routes"]

CANCEL_WAIT_S = 5  # DELETE waits this long for the run task to journal its end before answering


def register_run_routes(app: WarrenApp) -> None:
    runs = app.warren.runs

    @app.route("/v1/runs", methods=["POST"])
    async def create_run() -> Response:
        scenario_name = request.args.get("scenario")
        if not scenario_name:
            raise BadRequest(400, "query parameter scenario is required; valid scenarios: "
                             + ", ".join(list_scenarios()))
        seed = int_arg("seed", 0)
        body = await json_body(required=False)
        try:
            create = structure_or_error(body, RunCreate)
        except WireError as exc:
            raise BadRequest(400, str(exc)) from None
        run = runs().create(scenario_name, seed, create)
        return reply(run.view(), 201)

    @app.route("/v1/runs/<run_id>/fork", methods=["POST"])
    async def fork_run(run_id: str) -> Response:
        """A new run from a cursor of this run's journal (docs/fork.md, "Served"): the creation body plus cursor."""
        runs().get(run_id)  # 404 before the body is read: there is nothing to fork
        body = await json_body(required=True)
        try:
            fork = structure_or_error(body, RunFork)
        except WireError as exc:
            raise BadRequest(400, str(exc)) from None
        run = await runs().fork(run_id, fork)
        return reply(run.view(), 201)

    @app.route("/v1/runs", methods=["GET"])
    async def list_runs() -> Response:
        return reply({"runs": runs().list_views()})

    @app.route("/v1/runs/<run_id>", methods=["GET"])
    async def get_run(run_id: str) -> Response:
        return reply(runs().get(run_id).view())

    @app.route("/v1/runs/<run_id>/start", methods=["POST"])
    async def start_run(run_id: str) -> Response:
        run = runs().get(run_id)
        if run.is_ended:
            raise run_ended(run_id, run.status)
        run.start()
        return reply(run.view())

    @app.route("/v1/runs/<run_id>", methods=["DELETE"])
    async def cancel_run(run_id: str) -> Response:
        run = runs().get(run_id)
        run.cancel()
        with trio.move_on_after(CANCEL_WAIT_S):
            await run.ended.wait()
        return reply(run.view())

    @app.route("/v1/runs/<run_id>/journal", methods=["GET"])
    async def journal(run_id: str) -> Response:
        run = runs().get(run_id)
        since = int_arg("since", -1, minimum=-1)  # the records after cursor `since`, as flushed to disk
        text = await journal_text_of(run, since)  # an ended run's file is read in a worker thread
        return Response(text, content_type="application/x-ndjson")
