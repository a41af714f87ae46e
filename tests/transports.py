"""One agent-side API over both transports, so protocol tests run over HTTP and WebSocket unchanged.

Every call returns ``(status, body)``: over HTTP the response status; over the WebSocket binding the
JSON-RPC error code, which mirrors the HTTP status by design (200 for a result).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from server_helpers import Api


class HttpAgent:
    name = "http"

    def __init__(self, api: Api) -> None:
        self.api = api

    async def claim(self, run: str, agent: str = "engineer-1", lease: str | None = None) -> tuple[int, Any]:
        q = f"?lease={lease}" if lease else ""
        return await self.api.call("POST", f"/v1/runs/{run}/agents/{agent}/claim{q}")

    async def briefing(self, run: str, lease: str | None, agent: str = "engineer-1") -> tuple[int, Any]:
        q = f"?lease={lease}" if lease else ""
        return await self.api.call("GET", f"/v1/runs/{run}/agents/{agent}/briefing{q}")

    async def poll(self, run: str, lease: str | None, after: int = -1, wait: float = 25,
                   agent: str = "engineer-1") -> tuple[int, Any]:
        q = f"&lease={lease}" if lease else ""
        return await self.api.call("GET", f"/v1/runs/{run}/agents/{agent}/observations?after={after}&wait={wait}{q}")

    async def submit(self, run: str, lease: str | None, body: Any, agent: str = "engineer-1") -> tuple[int, Any]:
        q = f"?lease={lease}" if lease else ""
        return await self.api.call("POST", f"/v1/runs/{run}/agents/{agent}/commands{q}", body)

    async def receipt(self, run: str, lease: str, command_id: str, agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.api.call("GET", f"/v1/runs/{run}/agents/{agent}/commands/{command_id}?lease={lease}")

    async def release(self, run: str, lease: str, agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.api.call("POST", f"/v1/runs/{run}/agents/{agent}/release?lease={lease}")


class WsAgent:
    """A JSON-RPC 2.0 client over the Quart test client's WebSocket, with a background reader."""

    name = "ws"

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.responses: dict[int, trio.MemorySendChannel] = {}
        self.envelopes: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.ended: dict[str, dict[str, Any]] = {}
        self.subscribed: set[tuple[str, str]] = set()
        self.arrived = trio.Event()
        self.frames: list[dict[str, Any]] = []  # every message
        self.raw_frames: list[Any] = []  # every frame as sent: a message, or an array of them (batched frames)

    async def reader(self) -> None:
        while True:
            frame = json.loads(await self.ws.receive())
            self.raw_frames.append(frame)
            for msg in frame if isinstance(frame, list) else [frame]:  # initialize's frames "batched": arrays
                await self._message(msg)

    async def _message(self, msg: dict[str, Any]) -> None:
        self.frames.append(msg)
        if "id" in msg and ("result" in msg or "error" in msg):
            send = self.responses.pop(msg["id"], None)
            if send is not None:
                send.send_nowait(msg)
            return
        method, params = msg.get("method"), msg.get("params", {})
        if method == "ping" and "id" in msg:
            await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": params}))
        elif method == "observation":
            self._keep(params)
        elif method == "observations":
            for e in params["envelopes"]:
                self._keep(e)
        elif method == "run.status":
            self.ended[params["run_id"]] = params
        self.arrived.set()
        self.arrived = trio.Event()

    def _keep(self, note: dict[str, Any]) -> None:
        env = note["envelope"]
        self.envelopes.setdefault((env["run_id"], env["agent_id"]), []).append(env)

    async def call(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        self.next_id += 1
        rid = self.next_id
        send, receive = trio.open_memory_channel[dict](1)
        self.responses[rid] = send
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        msg = await receive.receive()
        if "result" in msg:
            return 200, msg["result"]
        err = msg["error"]
        status = err["code"] if err["code"] > 0 else 400
        return status, {"status": status, "detail": (err.get("data") or {}).get("detail", err["message"]),
                        "rpc": err}

    def _lease(self, params: dict[str, Any], lease: str | None) -> dict[str, Any]:
        if lease:
            params["lease"] = lease
        return params

    async def claim(self, run: str, agent: str = "engineer-1", lease: str | None = None) -> tuple[int, Any]:
        status, body = await self.call("agent.claim", self._lease({"run_id": run, "agent_id": agent}, lease))
        if status == 200:
            self.subscribed.add((run, agent))
            self.envelopes.pop((run, agent), None)  # the claim redelivers the outstanding one
        return status, body

    async def briefing(self, run: str, lease: str | None, agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.call("agent.briefing", self._lease({"run_id": run, "agent_id": agent}, lease))

    async def poll(self, run: str, lease: str | None, after: int = -1, wait: float = 25,
                   agent: str = "engineer-1") -> tuple[int, Any]:
        key = (run, agent)
        if key not in self.subscribed:
            status, body = await self.call("agent.subscribe", self._lease({"run_id": run, "agent_id": agent}, lease))
            if status != 200:
                return status, body
            self.subscribed.add(key)
        else:  # keep the lease honest: a poll is an authenticated request over HTTP too
            status, body = await self.call("agent.briefing", self._lease({"run_id": run, "agent_id": agent}, lease))
            if status not in (200,):
                if status == 410 or run in self.ended:
                    return 410, {"status": 410, "detail": f"{run} has ended with status "
                                 f"{self.ended.get(run, {}).get('status', '?')}"}
                return status, body
        with trio.move_on_after(wait):
            while True:
                for env in self.envelopes.get(key, []):
                    if env["seq"] > after:
                        return 200, env
                if run in self.ended:
                    return 410, {"status": 410, "detail": f"{run} has ended with status {self.ended[run]['status']}"}
                await self.arrived.wait()
        return 204, None

    async def submit(self, run: str, lease: str | None, body: Any, agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.call("agent.submit", self._lease({"run_id": run, "agent_id": agent, "command": body},
                                                           lease))

    async def receipt(self, run: str, lease: str, command_id: str, agent: str = "engineer-1") -> tuple[int, Any]:
        return await self.call("agent.receipt", {"run_id": run, "agent_id": agent, "lease": lease,
                                                 "command_id": command_id})

    async def release(self, run: str, lease: str, agent: str = "engineer-1") -> tuple[int, Any]:
        status, body = await self.call("agent.release", {"run_id": run, "agent_id": agent, "lease": lease})
        self.subscribed.discard((run, agent))
        return status, body


@asynccontextmanager
async def ws_agent(api: Api) -> AsyncIterator[WsAgent]:
    async with api.client.websocket("/v1/agent", headers={"X-Warren-Protocol": "warren-agent/0"}) as ws:
        agent = WsAgent(ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.reader)
            status, init = await agent.call("initialize", {"protocol": "warren-agent/0"})
            assert status == 200 and init["protocol"] == "warren-agent/0"
            yield agent
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def transport(kind: str, api: Api) -> AsyncIterator[Any]:
    if kind == "http":
        yield HttpAgent(api)
    else:
        async with ws_agent(api) as agent:
            yield agent
