"""What applies to every request: the run manager's lifetime, the protocol header, and error replies.

Every refusal becomes a problem+json reply here (a :class:`RunError` keeps its status and, for caps, its
``Retry-After``); an unexpected exception is logged and answered with a 500 that says it is a bug, never
a traceback.
"""

from __future__ import annotations

from typing import Any

import trio
from quart import Response, request, websocket
from werkzeug.exceptions import HTTPException

from ..protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_HEADER, PROTOCOL_VERSION, case_hint
from ..protocol.strict_json import MAX_BODY_BYTES
from ..runtime.clock import WallMap
from ..runtime.errors import RunError
from ..runtime.manager import RunManager
from .replies import BadRequest, problem_body, problem_reply
from .state import WarrenApp

__all__ = ["allowed_methods", "foreign_origin", "refusal", "register_hooks"]

_UNEXPECTED = ("the server failed on this request ({}); this is a bug in WARREN, please report it with the request "
               "that caused it")


def _refusal_parts(exc: Exception) -> tuple[int, str, list[tuple[str, str]], str | None]:
    """A refusal's status, detail, extra headers and ``run_status`` member: a :class:`RunError` keeps its status,
    its ``Retry-After`` and its run's terminal status (an ended run's 410), a :class:`BadRequest` its status;
    anything else is a bug (500)."""
    if isinstance(exc, RunError):
        extra = [] if exc.retry_after is None else [("Retry-After", str(exc.retry_after))]
        return exc.status, exc.detail, extra, exc.run_status
    if isinstance(exc, BadRequest):
        return exc.status, exc.detail, [], None
    return 500, _UNEXPECTED.format(type(exc).__name__), [], None


def refusal(exc: Exception) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """What the error handlers below answer for ``exc`` on a ``/v1`` path, as raw ASGI parts (status, headers,
    body): the HTTP lane's refusals (:mod:`.http_lane`), byte for byte Quart's."""
    status, detail, extra, run_status = _refusal_parts(exc)
    body = problem_body(status, detail, run_status).encode()
    headers = [(b"content-type", PROBLEM_CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode()),
               *((k.lower().encode(), v.encode()) for k, v in extra),
               (PROTOCOL_HEADER.lower().encode(), PROTOCOL_VERSION.encode())]
    if status == 413:
        headers.append((b"connection", b"close"))
    return status, headers, body


def foreign_origin(headers: Any, host_url: str, allowed: tuple[str, ...]) -> str | None:
    """Why a request from a browser page of another site is refused (403), or None to serve it.

    DESIGN section 11: a web page the user visits must not drive their local server with "simple"
    cross-origin requests. Requests without ``Origin`` (curl, the SDK, agents) are not from a page and
    are served; the server's own pages (the viewer) send their own origin; ``--allow-origin`` adds others.
    """
    origin = headers.get("Origin")
    if origin is None:
        return None
    origin = origin.strip().rstrip("/")
    own = host_url.rstrip("/")
    own_host = headers.get("Host", "")
    if origin in allowed or origin == own or origin.split("://", 1)[-1] == own_host:
        return None
    return (f"requests from the web origin {origin!r} are refused: a page of another site may not drive this "
            "server. Clients that are not browsers send no Origin header; to allow a site, start the server "
            "with --allow-origin " + origin)


def allowed_methods(app: Any, path: str) -> list[str]:
    """The methods some route of ``app`` accepts on ``path`` (for a 405's ``Allow`` header)."""
    adapter = app.url_map.bind("localhost")
    methods: set[str] = set()
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        try:
            adapter.match(path, method=method)
        except HTTPException:
            continue
        except Exception:  # noqa: BLE001 - a redirect or websocket-only rule: not an HTTP method here
            continue
        methods.add(method)
    if methods:
        methods |= {"HEAD", "OPTIONS"} if "GET" in methods else {"OPTIONS"}
    return sorted(methods)


def register_hooks(app: WarrenApp) -> None:
    """Lifecycle (the manager lives in the app's nursery), the protocol header, and the error handlers."""
    state = app.warren

    @app.before_serving
    async def _start() -> None:
        state.manager = RunManager(state.config, app.nursery, WallMap(state.config.rate), metrics=state.metrics,
                                   tracer=state.tracer)
        state.manager.restore()  # the data dir's runs: ended ones from disk, live ones resumed

    @app.after_serving
    async def _stop() -> None:
        if state.manager is not None:
            state.manager.shutdown()
            await trio.lowlevel.checkpoint()

    @app.before_request
    async def _check_protocol() -> Response | None:
        # host_url is only worth building for a request from a page (the rest send no Origin)
        refused = foreign_origin(request.headers, request.host_url, state.config.allow_origins) \
            if "Origin" in request.headers else None
        if refused is not None:
            return problem_reply(403, refused)
        if not request.path.startswith("/v1"):
            return None
        sent = request.headers.get(PROTOCOL_HEADER)
        if sent is not None and sent.strip() != PROTOCOL_VERSION:
            return problem_reply(409, f"this server speaks {PROTOCOL_VERSION}, the request's {PROTOCOL_HEADER} says "
                                 f"{sent!r}{case_hint(sent)}; send {PROTOCOL_HEADER}: {PROTOCOL_VERSION} or leave the header out")
        return None

    @app.before_websocket
    async def _check_ws_origin() -> Response | None:
        refused = foreign_origin(websocket.headers, websocket.host_url, state.config.allow_origins)
        if refused is not None:
            return problem_reply(403, refused)
        return None

    @app.after_request
    async def _stamp(response: Response) -> Response:
        if request.path.startswith("/v1"):
            response.headers[PROTOCOL_HEADER] = PROTOCOL_VERSION
        if response.status_code == 405 and "Allow" not in response.headers:
            allowed = allowed_methods(app, request.path)
            if allowed:
                response.headers["Allow"] = ", ".join(allowed)
        if response.status_code == 413:  # refused before the body was read: the connection cannot be reused
            response.headers["Connection"] = "close"
        return response

    @app.errorhandler(RunError)
    @app.errorhandler(BadRequest)
    async def _refused(exc: RunError | BadRequest) -> Response:
        status, detail, extra, run_status = _refusal_parts(exc)  # a cap (429) adds Retry-After (real seconds)
        response = problem_reply(status, detail, run_status)
        for name, value in extra:
            response.headers[name] = value
        return response

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
        status, detail, _, _ = _refusal_parts(exc)
        return problem_reply(status, detail)
