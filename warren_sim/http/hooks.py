"""What applies to every request: the run manager's lifetime, the protocol header, and error replies.

Every refusal becomes a problem+json reply here (a :class:`RunError` keeps its status and, for caps, its
``Retry-After``); an unexpected exception is logged and answered with a 500 that says it is a bug, never
a traceback.
"""

from __future__ import annotations

import trio
from quart import Response, request
from werkzeug.exceptions import HTTPException

from ..protocol import PROTOCOL_HEADER, PROTOCOL_VERSION
from ..protocol.strict_json import MAX_BODY_BYTES
from ..runtime.clock import WallMap
from ..runtime.errors import RunError
from ..runtime.manager import RunManager
from .replies import BadRequest, problem_reply
from .state import WarrenApp

__all__ = ["register_hooks"]


def register_hooks(app: WarrenApp) -> None:
    """Lifecycle (the manager lives in the app's nursery), the protocol header, and the error handlers."""
    state = app.warren

    @app.before_serving
    async def _start() -> None:
        state.manager = RunManager(state.config, app.nursery, WallMap(state.config.rate))

    @app.after_serving
    async def _stop() -> None:
        if state.manager is not None:
            state.manager.shutdown()
            await trio.lowlevel.checkpoint()

    @app.before_request
    async def _check_protocol() -> Response | None:
        if not request.path.startswith("/v1"):
            return None
        sent = request.headers.get(PROTOCOL_HEADER)
        if sent is not None and sent.strip() != PROTOCOL_VERSION:
            return problem_reply(409, f"this server speaks {PROTOCOL_VERSION}, the request's {PROTOCOL_HEADER} says "
                                 f"{sent!r}; send {PROTOCOL_HEADER}: {PROTOCOL_VERSION} or leave the header out")
        return None

    @app.after_request
    async def _stamp(response: Response) -> Response:
        if request.path.startswith("/v1"):
            response.headers[PROTOCOL_HEADER] = PROTOCOL_VERSION
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
            408: f"the request body did not arrive within {state.config.body_timeout_s:g} s; send the whole "
                 "body promptly (with a Content-Length that matches it)",
            413: f"the body is too large; at most {MAX_BODY_BYTES} bytes are accepted",
        }
        return problem_reply(status, details.get(status, exc.description or "request refused"))

    @app.errorhandler(Exception)
    async def _unexpected(exc: Exception) -> Response:
        app.logger.exception("unexpected error")
        return problem_reply(500, f"the server failed on this request ({type(exc).__name__}); this is a bug in "
                             "WARREN, please report it with the request that caused it")
