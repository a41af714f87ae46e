"""The app's typed state: what every route module needs, held on the app as ``app.warren``.

The manager exists only while the app is serving (it owns runs in the app's nursery), so routes reach
it through :meth:`AppState.runs`, which answers 503 in the window before serving starts instead of
failing with an attribute error.
"""

from __future__ import annotations

import attrs
from quart_trio import QuartTrio

from ..runtime.errors import RunError
from ..runtime.manager import RunManager, ServerConfig

__all__ = ["AppState", "WarrenApp"]


@attrs.define(eq=False)
class AppState:
    config: ServerConfig
    manager: RunManager | None = None  # set by the app's before_serving hook, kept after serving

    def runs(self) -> RunManager:
        """The run manager; 503 if the app is not serving yet."""
        if self.manager is None:
            raise RunError(503, "the server is starting; retry in a moment")
        return self.manager


class WarrenApp(QuartTrio):
    """A QuartTrio app with its typed state (``app.warren``), set once by :func:`~warren_sim.http.app.create_app`."""

    warren: AppState
