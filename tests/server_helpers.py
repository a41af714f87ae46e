"""In-process server helpers: the real Quart-Trio app, its test client, and real files for journals."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from warren_sim.http.app import create_app
from warren_sim.protocol.response_check import Seen, response_problems
from warren_sim.protocol.schema_registry import validation_errors
from warren_sim.runtime.manager import ServerConfig

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


class Api:
    """Thin verbs over the test client; every call returns (status, json-or-None)."""

    def __init__(self, app: Any, client: Any) -> None:
        self.app, self.client = app, client

    @property
    def manager(self) -> Any:
        return self.app.warren.manager

    async def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": {**PROTO, **(headers or {})}}
        if raw is not None:
            kwargs["data"] = raw
            if not any(k.lower() == "content-type" for k in kwargs["headers"]):
                kwargs["headers"]["Content-Type"] = "application/json"  # bodies must say JSON (else 415)
        elif body is not None:
            kwargs["data"] = json.dumps(body).encode()
            kwargs["headers"]["Content-Type"] = "application/json"
        if "data" in kwargs and not any(k.lower() == "content-length" for k in kwargs["headers"]):
            # as every real client sends it (Quart's test client does not): without it the HTTP lane hands the
            # request to Quart (warren_sim/http/http_lane.py), and the lane is what real clients get
            kwargs["headers"]["Content-Length"] = str(len(kwargs["data"]))
        r = await self.client.open(path, method=method, **kwargs)
        data = await r.get_data()
        self.last = r
        if r.status_code >= 500:
            raise AssertionError(f"5xx from {method} {path}: {data!r}")
        if r.status_code != 200 and r.status_code != 201 and r.status_code != 204:
            assert r.headers["Content-Type"].startswith("application/problem+json"), r.headers
        if path.startswith("/v1"):
            assert r.headers.get("X-Warren-Protocol") == "warren-agent/0"
            if r.status_code != 405:  # the endpoint table documents what each route answers
                seen = Seen(method, path.split("?")[0], r.status_code, r.headers, data)
                problems = [p for p in response_problems(seen, validation_errors)
                            if not p.startswith("no warren-agent/0 endpoint")]  # unknown routes: 404 checked above
                assert problems == [], f"{method} {path} -> {r.status_code} breaks its schema: {problems}"
        return r.status_code, (json.loads(data) if data else None)

    async def create(self, scenario: str = "bridge_repair", seed: int = 3, **body: Any) -> str:
        status, run = await self.call("POST", f"/v1/runs?scenario={scenario}&seed={seed}", body)
        assert status == 201, run
        return run["run_id"]

    async def claim(self, run: str, agent: str = "engineer-1", lease: str | None = None) -> str:
        q = f"?lease={lease}" if lease else ""
        status, body = await self.call("POST", f"/v1/runs/{run}/agents/{agent}/claim{q}")
        assert status == 200, body
        return body["lease"]

    async def poll(self, run: str, lease: str, after: int = -1, wait: float = 25,
                   agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.call("GET", f"/v1/runs/{run}/agents/{agent}/observations?after={after}&wait={wait}"
                               f"&lease={lease}")

    async def submit(self, run: str, lease: str, body: Any, agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.call("POST", f"/v1/runs/{run}/agents/{agent}/commands?lease={lease}", body)

    async def run_view(self, run: str) -> dict[str, Any]:
        status, body = await self.call("GET", f"/v1/runs/{run}")
        assert status == 200
        return body

    def journal(self, run: str) -> list[dict[str, Any]]:
        return list(self.manager.runs[run].journal.records)


@asynccontextmanager
async def served(tmp_path: Path, **config: Any) -> AsyncIterator[Api]:
    app = create_app(ServerConfig(data_dir=tmp_path / "data", **config))
    async with app.test_app():
        yield Api(app, app.test_client())
