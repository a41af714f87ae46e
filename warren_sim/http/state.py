"""The app's typed state: what every route module needs, held on the app as ``app.warren``.

The manager exists only while the app is serving (it owns runs in the app's nursery), so routes reach
it through :meth:`AppState.runs`, which answers 503 in the window before serving starts instead of
failing with an attribute error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from quart.routing import QuartRule
from quart_trio import QuartTrio

from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from ..observability.tracing import NO_TRACER, NoTracer, Tracer
from ..runtime.errors import RunError
from ..runtime.manager import RunManager, ServerConfig

__all__ = ["AppState", "LazyBuilderRule", "WarrenApp"]


@attrs.define(eq=False)
class AppState:
    config: ServerConfig
    manager: RunManager | None = None  # set by the app's before_serving hook, kept after serving
    metrics: Metrics | NoMetrics = NO_METRICS  # this app's own registry (GET /metrics), unless --no-metrics
    tracer: Tracer | NoTracer = NO_TRACER  # spans per agent request, when tracing is configured

    def runs(self) -> RunManager:
        """The run manager; 503 if the app is not serving yet."""
        if self.manager is None:
            raise RunError(503, "the server is starting; retry in a moment")
        return self.manager


class LazyBuilderRule(QuartRule):
    """A route whose URL builder is compiled when a URL is first built, not when the route is added.

    Werkzeug compiles two builder functions per rule (an AST, then ``compile()``) as each route is added:
    about 80% of :func:`~warren_sim.http.app.create_app`'s 30-50 ms, paid by every in-process app, so by every
    test that makes one (the pytest plugin's ``warren_app``, the warped expiry suite). WARREN never builds a
    URL from a route (no ``url_for``), so the builders are compiled only if somebody does; what they build is
    Werkzeug's own (tests/test_http_app.py builds URLs through them). Werkzeug's ``_compile_builder`` is
    private: if a release renames it, this class only stops saving the time.
    """

    def _compile_builder(self, append_unknown: bool = True) -> Callable[..., tuple[str, str]]:
        compile_now = super()._compile_builder
        compiled: list[Callable[..., tuple[str, str]]] = []

        def build(rule: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
            if not compiled:
                compiled.append(compile_now(append_unknown).__get__(rule, None))
            return compiled[0](*args, **kwargs)

        return build


class WarrenApp(QuartTrio):
    """A QuartTrio app with its typed state (``app.warren``), set once by :func:`~warren_sim.http.app.create_app`."""

    warren: AppState
    url_rule_class = LazyBuilderRule  # type: ignore[assignment]  # as Quart does for its QuartRule
