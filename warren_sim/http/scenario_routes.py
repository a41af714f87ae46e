"""Discovery routes: ``GET /v1`` (what this server is and speaks), ``GET /v1/scenarios``, ``GET /v1/scenarios/{name}``
(with the world's ``layout``, see :mod:`warren_sim.runtime.scenario_info`).

They read scenario descriptions (from the runtime) and the app's URL map, never a run.
"""

from __future__ import annotations

import re

import trio
from quart import Response, request

from .. import __version__
from ..protocol import PROTOCOL_VERSION
from ..runtime.scenario_info import describe_scenario, scenario_summaries
from .replies import reply
from .state import WarrenApp
from .ws_lane import PATH as AGENT_SOCKET

__all__ = ["endpoints", "register_scenario_routes"]


_METHOD_ORDER = {"GET": 0, "POST": 1, "DELETE": 2, "WS": 3}


def endpoints(app: WarrenApp) -> list[dict[str, str]]:
    """Every /v1 route the app serves as ``{"method", "path"}``, paths as OpenAPI writes them, sorted by path.

    WebSocket routes have the method ``"WS"``; the others are exactly the operations of the OpenAPI document.
    The app's URL map has every route but ``WS /v1/agent``, which the raw ASGI lane serves (:mod:`.ws_lane`).
    """
    out = [{"method": "WS", "path": AGENT_SOCKET}]
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1"):
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        methods = ["WS"] if getattr(rule, "websocket", False) else sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})
        out += [{"method": m, "path": path} for m in methods]
    return sorted(out, key=lambda e: (e["path"], _METHOD_ORDER.get(e["method"], 9)))


def register_scenario_routes(app: WarrenApp) -> None:
    @app.route("/v1", methods=["GET"])
    async def index() -> Response:
        return reply({"protocol": PROTOCOL_VERSION, "server": f"warren {__version__}",
                      "endpoints": endpoints(app)})

    @app.route("/v1/scenarios", methods=["GET"])
    async def scenarios() -> Response:
        return reply({"scenarios": scenario_summaries()})

    @app.route("/v1/scenarios/<name>", methods=["GET"])
    async def scenario(name: str) -> Response:
        # the description, with the layout of the world that ?params=<JSON object> gives; a worker thread
        # builds it, so a large world (100,000 foragers) never stalls the server's other requests
        return reply(await trio.to_thread.run_sync(describe_scenario, name, request.args.get("params")))
