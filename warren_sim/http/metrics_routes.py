"""``GET /metrics`` (Prometheus text, or OpenMetrics when asked), and the app's observability set up once.

:func:`register_metrics` gives the app its own :class:`~warren_sim.observability.metrics.Metrics` (unless
``ServerConfig.metrics`` is off: ``warren serve --no-metrics``, then there is no route either) and its tracer
(:func:`~warren_sim.observability.tracing.tracer_for`). It times every request Quart answers, by route: the
hot agent routes the HTTP lane answers are timed by the lane under the same route names
(:mod:`.http_lane`), the WebSocket methods by their session (:mod:`.agent_ws`).

The gauges (runs by status, leases, parked long-polls, spectators) are read from the manager when Prometheus
scrapes (:func:`_read_state`), so they cost the hot path nothing; the scrape itself walks the live runs' agents
once.
"""

from __future__ import annotations

from collections import Counter

import trio
from quart import Response, g, request

from ..observability.metrics import State
from ..observability.tracing import tracer_for
from ..protocol.models import TERMINAL_RUN_STATUSES
from ..runtime.clock import wall_seconds
from ..runtime.manager import new_metrics
from ..runtime.run import Run
from .state import AppState, WarrenApp

__all__ = ["register_metrics"]

STATUSES = ("created", "running", *sorted(TERMINAL_RUN_STATUSES))


def _read_state(state: AppState) -> State | None:
    """The scrape-time gauges, read from the manager (None before the app serves)."""
    manager = state.manager
    if manager is None:
        return None
    by_status: Counter[str] = Counter(dict.fromkeys(STATUSES, 0))
    leases = polls = spectators = 0
    now = trio.current_time()
    for run in list(manager.runs.values()):
        by_status[run.status] += 1
        spectators += run.spectators
        if isinstance(run, Run) and not run.is_ended:
            for ra in run.remote.values():
                lease = ra.lease
                if lease is not None:
                    leases += lease.expires_at > now
                    polls += lease.polls
    return State(runs_by_status=by_status, leases=leases, long_polls=polls, spectators=spectators)


def register_metrics(app: WarrenApp) -> None:
    state = app.warren
    state.tracer = tracer_for(state.config.tracer_provider)
    if not state.config.metrics:
        return
    metrics = state.metrics = new_metrics()
    metrics.read_state_with(lambda: _read_state(state))

    @app.before_request
    async def _began() -> None:
        g.warren_began = wall_seconds()

    @app.after_request
    async def _timed(response: Response) -> Response:
        began = g.get("warren_began")
        if began is not None:
            rule = request.url_rule
            route = f"{request.method} {rule.rule}" if rule is not None else "(no route)"
            metrics.request(route, "http", wall_seconds() - began)
        return response

    @app.route("/metrics", methods=["GET"])
    async def scrape() -> Response:
        body, content_type = metrics.exposition(request.headers.get("Accept"))
        return Response(body, status=200, content_type=content_type)
