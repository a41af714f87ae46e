"""``warren_app``: the WARREN app inside the test's own trio run, for tests under pytest-trio's autojump clock.

Why in-process: under ``autojump_clock`` a 300 s lease TTL or a 60 s decision deadline passes the moment every
task waits, so expiry paths cost microseconds. That only works with no real sockets and no threads (the clock
would jump while Hypercorn waits on I/O, DESIGN section 8), so the app runs in the test's trio run behind
Quart-Trio's ``test_app()`` (its ``before_serving`` starts the run manager in the app's nursery) and the SDK's
:class:`~warren_sim.client.AsyncAgentClient` reaches it through ``httpx.ASGITransport``: the same requests and
responses as over the network, with no network. Journals stay in memory (no data directory to clean up).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import trio

from ..client import AsyncAgentClient
from ..http.app import create_app
from ..protocol.models import TERMINAL_RUN_STATUSES
from ..runtime.manager import ServerConfig
from .served import RunName, WarrenTestError, checked, server_options

__all__ = ["AppRun", "InProcessWarren", "open_in_process"]

#: The base URL of the in-process app (no request ever leaves the process).
BASE_URL = "http://warren.test"
#: Clock seconds between two polls of a run's status in :meth:`AppRun.wait_status` (free under autojump).
POLL_S = 0.05


@attrs.define(eq=False)
class InProcessWarren:
    """The app in this trio run: ``app``, an ``http`` client bound to it, and the SDK's ``client`` on that."""

    app: Any
    http: httpx.AsyncClient
    client: AsyncAgentClient
    url: str = BASE_URL

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = await self.http.request(method, path, **kwargs)
        return checked(method, path, response)

    async def create_run(self, scenario: str, seed: int = 0, controlled_agents: Iterable[str] = (),
                         **options: Any) -> AppRun:
        """``POST /v1/runs``: ``options`` are the body's other fields (``npc_policy``, ``pace``,
        ``decision_deadline_s``, ``params``)."""
        body = {"controlled_agents": list(controlled_agents), **options}
        response = await self.request("POST", "/v1/runs", params={"scenario": scenario, "seed": seed}, json=body)
        return AppRun(self, response.json()["run_id"], scenario, seed)

    async def fork(self, run: AppRun | str, cursor: int, controlled_agents: Iterable[str] = (),
                   **options: Any) -> AppRun:
        """``POST /v1/runs/{run}/fork``, as :meth:`WarrenServer.fork <warren_sim.testing.WarrenServer.fork>`."""
        body = {"cursor": cursor, "controlled_agents": list(controlled_agents), **options}
        view = (await self.request("POST", f"/v1/runs/{run}/fork", json=body)).json()
        return AppRun(self, view["run_id"], view["scenario"], view["seed"])

    async def journal(self, run: AppRun | str) -> list[dict[str, Any]]:
        text = (await self.request("GET", f"/v1/runs/{run}/journal")).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    async def view(self, run: AppRun | str) -> dict[str, Any]:
        return (await self.request("GET", f"/v1/runs/{run}")).json()


@attrs.define(eq=False)
class AppRun(RunName):
    """A run on the in-process app; ``str(run)`` is its id. Its methods are async."""

    warren: InProcessWarren
    run_id: str
    scenario: str
    seed: int

    async def view(self) -> dict[str, Any]:
        """``GET /v1/runs/{run}`` as the wire's JSON dict (``view["status"]``, ``view["result"]``), like
        ``journal()``: the plugin hands tests what the server sent. The SDK's ``get_run`` is the same as a typed
        ``RunView`` (``.status``, ``.result``), for agents."""
        return await self.warren.view(self.run_id)

    async def journal(self) -> list[dict[str, Any]]:
        return await self.warren.journal(self.run_id)

    async def start(self) -> dict[str, Any]:
        return (await self.warren.request("POST", f"/v1/runs/{self.run_id}/start")).json()

    async def cancel(self) -> dict[str, Any]:
        return (await self.warren.request("DELETE", f"/v1/runs/{self.run_id}")).json()

    async def wait_status(self, status: str, timeout: float) -> dict[str, Any]:
        """Poll until the run has ``status``; ``timeout`` is in trio clock seconds (virtual under autojump)."""
        view: dict[str, Any] = {}
        with trio.move_on_after(timeout):
            while True:
                view = await self.view()
                if view["status"] == status:
                    return view
                if view["status"] in TERMINAL_RUN_STATUSES:
                    raise WarrenTestError(f"{self.run_id} ended {view['status']} "
                                          f"({(view.get('result') or {}).get('reason', '')}), not {status}")
                await trio.sleep(POLL_S)
        raise WarrenTestError(f"{self.run_id} is still {view.get('status')} after {timeout:g} s of the trio clock; it "
                              f"did not become {status}")


@asynccontextmanager
async def open_in_process(**options: Any) -> AsyncIterator[InProcessWarren]:
    """Serve the app in this trio run (Quart-Trio's ``test_app``) and bind the SDK's async client to it."""
    options = server_options(dict(options))
    options.pop("rate", None)  # the test's clock (autojump) is the only rate in-process
    app: Any = create_app(ServerConfig(data_dir=None, **options))  # an ASGI app; Quart's types are narrower than httpx's
    async with app.test_app():
        # timeout=None: a client's timeouts would run on the test's (autojump) clock, and long-polls bound themselves
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL, timeout=None)
        client = AsyncAgentClient(http, owns_http=True)
        try:
            yield InProcessWarren(app, http, client)
        finally:
            await client.aclose()
