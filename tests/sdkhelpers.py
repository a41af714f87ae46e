"""Helpers for the SDK tests (imported as ``sdkhelpers``): the app in-process or on a real Hypercorn, an httpx
event hook that validates every response against the protocol's endpoint table and JSON Schemas, and
transports that lose responses the way a flaky network does.

``in_process()`` and ``real_server()`` yield an :class:`Env` and, when the block ends, assert that every
response the clients received fitted its schema (and that there were some).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from warren_sim.client import AgentClient, AsyncAgentClient, RetryPolicy
from warren_sim.conformance import Seen, response_problems
from warren_sim.http.app import create_app
from warren_sim.http.server import start_server
from warren_sim.protocol.schema_registry import validation_errors
from warren_sim.runtime.manager import ServerConfig

#: Quick retries: tests must not sit in backoff.
FAST_RETRY = RetryPolicy(attempts=4, backoff=0.01, max_backoff=0.05)


class SchemaCheck:
    """An httpx response hook (async and sync flavours) that checks each response by route, and remembers."""

    def __init__(self) -> None:
        self.count = 0
        self.problems: list[str] = []
        self.statuses: list[tuple[str, str, int]] = []

    def _check(self, response: httpx.Response) -> None:
        request = response.request
        seen = Seen(request.method, request.url.path, response.status_code, response.headers, response.content)
        self.count += 1
        self.statuses.append((request.method, request.url.path, response.status_code))
        self.problems += [f"{request.method} {request.url.path} -> {response.status_code}: {p}"
                          for p in response_problems(seen, validation_errors)]

    async def async_hook(self, response: httpx.Response) -> None:
        await response.aread()
        self._check(response)

    def sync_hook(self, response: httpx.Response) -> None:
        response.read()
        self._check(response)

    def assert_clean(self) -> None:
        assert self.count > 0, "no response was checked"
        assert self.problems == [], "\n".join(self.problems)


@attrs.define
class Env:
    """A server to talk to: ``url``, ``app``, and a way to make checked clients for it."""

    url: str
    app: Any
    check: SchemaCheck
    make_transport: Callable[[], httpx.AsyncBaseTransport]

    def http(self, wrap: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] | None = None
             ) -> httpx.AsyncClient:
        transport = self.make_transport()
        if wrap is not None:
            transport = wrap(transport)
        return httpx.AsyncClient(transport=transport, base_url=self.url, timeout=10.0,
                                 event_hooks={"response": [self.check.async_hook]})

    def client(self, wrap: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] | None = None
               ) -> AsyncAgentClient:
        return AsyncAgentClient(self.http(wrap), retry=FAST_RETRY, owns_http=True)

    def sync_client(self) -> AgentClient:
        http = httpx.Client(base_url=self.url, timeout=10.0, event_hooks={"response": [self.check.sync_hook]})
        return AgentClient(http, retry=FAST_RETRY, owns_http=True)

    @property
    def manager(self) -> Any:
        return self.app.warren.manager


@asynccontextmanager
async def in_process(**config: Any) -> AsyncIterator[Env]:
    """The real app in this trio run, reached through ``httpx.ASGITransport`` (no sockets: autojump is fine)."""
    config.setdefault("data_dir", None)
    app = create_app(ServerConfig(**config))
    check = SchemaCheck()
    async with app.test_app():
        yield Env("http://warren.test", app, check, lambda: httpx.ASGITransport(app=app))
    check.assert_clean()


@asynccontextmanager
async def real_server(data_dir: Path | None = None, **config: Any) -> AsyncIterator[Env]:
    """The app on a real Hypercorn on a free loopback port (use the real clock with it)."""
    config.setdefault("data_dir", data_dir)
    check = SchemaCheck()
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(**config), "127.0.0.1", 0))
        try:
            yield Env(server.url, server.app, check, httpx.AsyncHTTPTransport)
        finally:
            server.shutdown()
    check.assert_clean()


class LosingTransport(httpx.AsyncBaseTransport):
    """Forwards requests, but for the first ``times`` requests that ``match`` it fails like a dropped connection:
    ``after=True`` lets the request reach the server and loses only the response (``httpx.ReadError``);
    ``after=False`` fails before sending (``httpx.ConnectError``)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, match: Callable[[httpx.Request], bool], *,
                 after: bool = True, times: int = 1) -> None:
        self.inner, self.match, self.after, self.left = inner, match, after, times
        self.dropped: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.left > 0 and self.match(request):
            self.left -= 1
            self.dropped.append(request)
            if not self.after:
                raise httpx.ConnectError("connection refused (simulated)", request=request)
            response = await self.inner.handle_async_request(request)
            await response.aread()
            await response.aclose()
            raise httpx.ReadError("connection reset while reading the response (simulated)", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class RewritingTransport(httpx.AsyncBaseTransport):
    """Lets ``rewrite(request) -> request`` and ``alter(response) -> response`` change traffic (a buggy network
    or server, as far as the SDK can tell)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, rewrite: Callable[[httpx.Request], httpx.Request] | None = None,
                 alter: Callable[[httpx.Request, httpx.Response], httpx.Response] | None = None) -> None:
        self.inner, self.rewrite, self.alter = inner, rewrite, alter

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.rewrite is not None:
            request = self.rewrite(request)
        response = await self.inner.handle_async_request(request)
        if self.alter is None:
            return response
        await response.aread()
        return self.alter(request, response)

    async def aclose(self) -> None:
        await self.inner.aclose()


def is_command_post(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.endswith("/commands")


def journal_verdicts(env: Env, run_id: str, command_id: str) -> list[str]:
    """The verdicts the run's journal recorded for one command id, in order."""
    run = env.manager.get(run_id)
    return [r["status"] for r in run.journal.records if r.get("kind") == "verdict" and r.get("command_id") == command_id]
