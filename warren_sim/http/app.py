"""The Quart-Trio app of warren-agent/0: routes only.

Each route turns a request into one call on the runtime and its result into a response. Errors are
``application/problem+json`` bodies whose ``detail`` teaches; nothing a client sends can produce a
5xx. Responses are serialized here with ``json.dumps`` (no key sorting) so field order is the
order of the wire models.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from .. import PROTOCOL, __version__
from ..protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_HEADER
from ..protocol.converter import WireError, structure_or_error
from ..protocol.models import RunCreate, problem
from ..protocol.strict_json import MAX_BODY_BYTES, StrictJSONError, loads_strict
from ..runtime.clock import WallMap
from ..runtime.manager import RunManager, ServerConfig
from ..runtime.run import RunError
from ..scenarios import ScenarioError, list_scenarios, load_scenario
from .docs_routes import register_docs_routes
from .stream_routes import register_stream_routes
from .viewer_routes import register_viewer_routes


class BadRequest(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def reply(obj: Any, status: int = 200, content_type: str = "application/json") -> Response:
    return Response(json.dumps(obj, ensure_ascii=False), status=status, content_type=content_type)


def problem_reply(status: int, detail: str) -> Response:
    return reply(problem(status, detail), status, PROBLEM_CONTENT_TYPE)


def _int_arg(name: str, default: int | None, minimum: int | None = None) -> int:
    raw = request.args.get(name)
    if raw is None:
        if default is None:
            raise BadRequest(400, f"query parameter {name} is required (an integer)")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(400, f"query parameter {name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise BadRequest(400, f"query parameter {name} must be >= {minimum}, got {value}")
    if abs(value) > 2**53 - 1:
        raise BadRequest(400, f"query parameter {name} must be within +/-(2^53-1), got {raw}")
    return value


def _float_arg(name: str, default: float) -> float:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(400, f"query parameter {name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise BadRequest(400, f"query parameter {name} must be a finite number >= 0, got {raw!r}")
    return value


async def _json_body(required: bool) -> Any:
    data = await request.get_data()
    if len(data) > MAX_BODY_BYTES:
        raise BadRequest(413, f"the body is {len(data)} bytes; at most {MAX_BODY_BYTES} are accepted")
    if not data.strip():
        if required:
            raise BadRequest(400, "this request needs a JSON object body")
        return {}
    try:
        return loads_strict(data)
    except StrictJSONError as exc:
        raise BadRequest(400, f"the body is not acceptable JSON: {exc}") from None


def create_app(config: ServerConfig | None = None) -> QuartTrio:
    config = config or ServerConfig()
    app = QuartTrio("warren_sim")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["RESPONSE_TIMEOUT"] = None  # long-polls bound themselves; streams must not be cut
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = True
    state: dict[str, Any] = {}

    def manager() -> RunManager:
        return state["manager"]

    @app.before_serving
    async def _start() -> None:
        wallmap = WallMap(config.rate)
        state["manager"] = RunManager(config, app.nursery, wallmap)

    @app.after_serving
    async def _stop() -> None:
        if "manager" in state:
            manager().shutdown()
            await trio.lowlevel.checkpoint()

    app.warren_state = state  # type: ignore[attr-defined]
    register_docs_routes(app)  # GET /v1/schemas, /v1/schemas/<name>, /v1/openapi.json
    register_stream_routes(app, config, manager)  # WS /v1/runs/<run>/stream, GET /v1/runs/<run>/events
    register_viewer_routes(app, manager)  # GET /, /runs/<run>, /runs/<run>/observations/<id>: the viewer

    @app.before_request
    async def _check_protocol() -> Response | None:
        if not request.path.startswith("/v1"):
            return None
        sent = request.headers.get(PROTOCOL_HEADER)
        if sent is not None and sent.strip() != PROTOCOL:
            return problem_reply(409, f"this server speaks {PROTOCOL}, the request's {PROTOCOL_HEADER} says "
                                 f"{sent!r}; send {PROTOCOL_HEADER}: {PROTOCOL} or leave the header out")
        return None

    @app.after_request
    async def _stamp(response: Response) -> Response:
        if request.path.startswith("/v1"):
            response.headers[PROTOCOL_HEADER] = PROTOCOL
        return response

    @app.errorhandler(RunError)
    async def _run_error(exc: RunError) -> Response:
        response = problem_reply(exc.status, exc.detail)
        if exc.retry_after is not None:  # a cap (429): when trying again makes sense, in real seconds
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.errorhandler(BadRequest)
    async def _bad_request(exc: BadRequest) -> Response:
        return problem_reply(exc.status, exc.detail)

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        details = {
            404: f"no such endpoint {request.method} {request.path}; see GET /v1 for the endpoints",
            405: f"{request.method} is not allowed on {request.path}",
            408: f"the request body did not arrive within {config.body_timeout_s:g} s; send the whole body "
                 "promptly (with a Content-Length that matches it)",
            413: f"the body is too large; at most {MAX_BODY_BYTES} bytes are accepted",
        }
        return problem_reply(status, details.get(status, exc.description or "request refused"))

    @app.errorhandler(Exception)
    async def _unexpected(exc: Exception) -> Response:
        app.logger.exception("unexpected error")
        return problem_reply(500, f"the server failed on this request ({type(exc).__name__}); this is a bug in "
                             "WARREN, please report it with the request that caused it")

    from .agent_ws import register as register_agent_ws

    register_agent_ws(app, manager, config.heartbeat_s)

    def route(rule: str, methods: list[str]) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
        return app.route(rule, methods=methods)

    # -- discovery ---------------------------------------------------------------------------------
    @route("/v1", ["GET"])
    async def index() -> Response:
        return reply({"protocol": PROTOCOL, "server": f"warren {__version__}",
                      "endpoints": [f"{r.methods and sorted(r.methods - {'HEAD', 'OPTIONS'})} {r.rule}"
                                    for r in app.url_map.iter_rules() if r.rule.startswith("/v1")]})

    @route("/v1/scenarios", ["GET"])
    async def scenarios() -> Response:
        out = []
        for name in list_scenarios():
            try:
                spec = load_scenario(name).spec
            except ScenarioError:
                continue
            out.append({"name": name, "title": spec.title, "premise": spec.premise,
                        "agents": len(spec.agents)})
        return reply({"scenarios": out})

    @route("/v1/scenarios/<name>", ["GET"])
    async def scenario(name: str) -> Response:
        from .scenario_view import ScenarioRequestError, describe_scenario

        try:
            return reply(describe_scenario(name, request.args.get("params")))
        except ScenarioRequestError as exc:
            raise BadRequest(exc.status, exc.detail) from None

    # -- runs ----------------------------------------------------------------------------------------
    @route("/v1/runs", ["POST"])
    async def create_run() -> Response:
        scenario_name = request.args.get("scenario")
        if not scenario_name:
            raise BadRequest(400, "query parameter scenario is required; valid scenarios: "
                             + ", ".join(list_scenarios()))
        seed = _int_arg("seed", 0)
        body = await _json_body(required=False)
        try:
            create = structure_or_error(body, RunCreate)
        except WireError as exc:
            raise BadRequest(400, str(exc)) from None
        run = manager().create(scenario_name, seed, create)
        return reply(run.view(), 201)

    @route("/v1/runs", ["GET"])
    async def list_runs() -> Response:
        return reply({"runs": manager().list_views()})

    @route("/v1/runs/<run_id>", ["GET"])
    async def get_run(run_id: str) -> Response:
        return reply(manager().get(run_id).view())

    @route("/v1/runs/<run_id>/start", ["POST"])
    async def start_run(run_id: str) -> Response:
        run = manager().get(run_id)
        if run.is_ended:
            raise RunError(410, f"{run_id} has ended with status {run.status}")
        run.start()
        return reply(run.view())

    @route("/v1/runs/<run_id>", ["DELETE"])
    async def cancel_run(run_id: str) -> Response:
        run = manager().get(run_id)
        run.cancel()
        with trio.move_on_after(5):
            await run.ended.wait()
        return reply(run.view())

    @route("/v1/runs/<run_id>/journal", ["GET"])
    async def journal(run_id: str) -> Response:
        from ..engine.records import dumps_record

        run = manager().get(run_id)
        since = _int_arg("since", -1, minimum=-1)  # the records after cursor `since`, as flushed to disk
        text = "".join(dumps_record(r) + "\n" for r in run.journal.records[since + 1:run.journal.flushed])
        return Response(text, content_type="application/x-ndjson")

    # -- agents --------------------------------------------------------------------------------------
    def _lease() -> str | None:
        return request.args.get("lease")

    @route("/v1/runs/<run_id>/agents/<agent_id>/claim", ["POST"])
    async def claim(run_id: str, agent_id: str) -> Response:
        asked = request.args.get("protocol")
        if asked is not None and asked != PROTOCOL:
            raise RunError(409, f"this server speaks {PROTOCOL}, the claim asked for protocol={asked!r}")
        run = manager().get(run_id)
        token, _ = run.claim(agent_id, _lease())
        return reply({"lease": token, "briefing_revision": 1})

    @route("/v1/runs/<run_id>/agents/<agent_id>/release", ["POST"])
    async def release(run_id: str, agent_id: str) -> Response:
        manager().get(run_id).release(agent_id, _lease())
        return reply({"agent_id": agent_id, "released": True})

    @route("/v1/runs/<run_id>/agents/<agent_id>/briefing", ["GET"])
    async def get_briefing(run_id: str, agent_id: str) -> Response:
        run = manager().get(run_id)
        run.authenticate(agent_id, _lease())
        return reply(run.briefing_for(agent_id))

    @route("/v1/runs/<run_id>/agents/<agent_id>/observations", ["GET"])
    async def observations(run_id: str, agent_id: str) -> Response:
        run = manager().get(run_id)
        after = _int_arg("after", -1, minimum=-1)
        wait = min(_float_arg("wait", 0.0), config.max_wait_s)
        ra = run.authenticate(agent_id, _lease())
        env = await run.wait_observation(ra, after, wait)
        if env is None:
            return Response("", status=204)
        return reply(env)

    @route("/v1/runs/<run_id>/agents/<agent_id>/commands", ["POST"])
    async def submit(run_id: str, agent_id: str) -> Response:
        run = manager().get(run_id)
        ra = run.authenticate(agent_id, _lease())
        body = await _json_body(required=True)
        judgement = run.submit(ra, body)
        if judgement.receipt is None:
            return problem_reply(422, judgement.problem_detail)
        return reply(_receipt_dict(judgement.receipt))

    @route("/v1/runs/<run_id>/agents/<agent_id>/commands/<command_id>", ["GET"])
    async def get_receipt(run_id: str, agent_id: str, command_id: str) -> Response:
        run = manager().get(run_id)
        ra = run.authenticate(agent_id, _lease())
        return reply(_receipt_dict(run.receipt(ra, command_id)))

    return app


def _receipt_dict(receipt: Any) -> dict[str, Any]:
    from ..protocol.converter import converter

    return converter.unstructure(receipt)
