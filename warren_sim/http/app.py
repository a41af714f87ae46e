"""The Quart-Trio app of warren-agent/0: composed here from its route modules.

Each route turns a request into one call on the runtime and its result into a response; errors are
``application/problem+json`` bodies whose ``detail`` teaches, and nothing a client sends can produce a
5xx. What each module owns:

- :mod:`.hooks`: the run manager's lifetime, the protocol header, every error reply;
- :mod:`.docs_routes`: schemas and OpenAPI; :mod:`.stream_routes`: spectator streams (WS and SSE);
- :mod:`.scenario_routes`: ``GET /v1`` and scenarios; :mod:`.run_routes`: runs and journals;
- :mod:`.agent_routes`: agents over HTTP long-polling.

Two raw ASGI lanes wrap Quart's ASGI app (Hypercorn and Quart's test client both call ``app.asgi_app``):
:mod:`.ws_lane` serves ``WS /v1/agent`` (the JSON-RPC session of :mod:`.agent_ws`), and :mod:`.http_lane` answers
the two hot agent routes in their plain form with the same functions as Quart's routes. Every agent request, on
any of them, is one call of :mod:`warren_sim.runtime.agent_ops`.

Their shared state is one typed :class:`~.state.AppState` on ``app.warren``.
"""

from __future__ import annotations

from ..protocol.strict_json import MAX_BODY_BYTES
from ..runtime.manager import ServerConfig
from .agent_routes import register_agent_routes
from .docs_routes import register_docs_routes
from .fault_lane import fault_lane
from .hooks import register_hooks
from .http_lane import http_lane
from .metrics_routes import register_metrics
from .run_routes import register_run_routes
from .scenario_routes import register_scenario_routes
from .state import AppState, WarrenApp
from .stream_routes import register_stream_routes
from .viewer_routes import register_viewer_routes
from .ws_lane import ws_lane

__all__ = ["create_app"]


def create_app(config: ServerConfig | None = None) -> WarrenApp:
    """A new app serving warren-agent/0 with ``config``; its runs live while it serves."""
    app = WarrenApp("warren_sim")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["RESPONSE_TIMEOUT"] = None  # long-polls bound themselves; streams must not be cut
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = True
    app.warren = AppState(config or ServerConfig())
    register_metrics(app)  # GET /metrics, and the observability the routes share (first: it times the others)
    register_hooks(app)
    register_docs_routes(app)  # GET /v1/schemas, /v1/schemas/<name>, /v1/openapi.json
    register_stream_routes(app)  # WS /v1/runs/<run>/stream, GET /v1/runs/<run>/events
    register_scenario_routes(app)  # GET /v1, /v1/scenarios, /v1/scenarios/<name>
    register_run_routes(app)  # /v1/runs, /v1/runs/<run>, .../start, .../journal
    register_agent_routes(app)  # /v1/runs/<run>/agents/<agent>/...
    register_viewer_routes(app)  # GET /, /runs/<run>, /runs/<run>/observations/<id>: the viewer
    app.asgi_app = http_lane(app, app.asgi_app)  # type: ignore[method-assign,assignment]  # the hot agent routes, Quart-less
    app.asgi_app = ws_lane(app, app.asgi_app)  # type: ignore[method-assign]  # WS /v1/agent as raw ASGI
    app.asgi_app = fault_lane(app, app.asgi_app)  # type: ignore[method-assign,assignment]  # seeded faults (docs/faults.md)
    return app
