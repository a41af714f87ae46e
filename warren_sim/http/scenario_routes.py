"""Discovery routes: ``GET /v1`` (what this server is and speaks), ``GET /v1/scenarios``, ``GET /v1/scenarios/{name}``.

They read scenario files and the app's URL map, never a run.
"""

from __future__ import annotations

import re

from quart import Response

from .. import __version__
from ..protocol import PROTOCOL_VERSION
from ..runtime.errors import RunError
from ..scenarios import ScenarioError, list_scenarios, load_scenario
from .replies import reply
from .state import WarrenApp

__all__ = ["endpoints", "register_scenario_routes"]


_METHOD_ORDER = {"GET": 0, "POST": 1, "DELETE": 2, "WS": 3}


def endpoints(app: WarrenApp) -> list[dict[str, str]]:
    """Every /v1 route the app serves as ``{"method", "path"}``, paths as OpenAPI writes them, sorted by path.

    WebSocket routes have the method ``"WS"``; the others are exactly the operations of the OpenAPI document.
    """
    out = []
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
        out = []
        for name in list_scenarios():
            try:
                spec = load_scenario(name).spec
            except ScenarioError:
                continue
            out.append({"name": name, "title": spec.title, "premise": spec.premise,
                        "agents": len(spec.agents)})
        return reply({"scenarios": out})

    @app.route("/v1/scenarios/<name>", methods=["GET"])
    async def scenario(name: str) -> Response:
        if name not in list_scenarios():
            raise RunError(404, f"unknown scenario {name!r}; valid scenarios: {', '.join(list_scenarios())}")
        spec = load_scenario(name).spec
        return reply({
            "name": name, "title": spec.title, "premise": spec.premise,
            "roles": [{"name": r.name, "description": r.description, "tools": list(r.tools)} for r in spec.roles],
            "agents": [{"agent_id": a.id, "role": a.role, "name": a.name} for a in spec.agents],
            "objectives": [{"id": o.id, "description": o.description, "target": o.target,
                            "deadline_ms": o.deadline_ms} for o in spec.objectives],
            "parameters": [{"name": p.name, "type": p.type, "default": p.default, "description": p.description,
                            "min": p.minimum, "max": p.maximum} for p in spec.params],
        })
