"""A real headless Chromium driven over the DevTools protocol, for the viewer's tests.

No driver package: Chromium writes its DevTools port to ``DevToolsActivePort`` in a fresh profile
directory, ``PUT /json/new?URL`` opens a page, and the page's WebSocket speaks CDP (JSON-RPC), through
trio-websocket, which WARREN already depends on. Console errors, uncaught exceptions and failed
loads are collected from ``Runtime`` and ``Log`` events, so a test can assert there were none.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import trio
from trio_websocket import open_websocket_url

# The flags of /work/.library/env/machines/python.md: headless, no sandbox (root in CI), no GPU, nothing
# that phones home; a fresh --user-data-dir per browser.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,860", "--remote-debugging-port=0"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Page:
    """One tab: ``call`` a CDP method, ``evaluate`` JavaScript, collect ``errors``."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[trio.Event, list[Any]]] = {}
        self.errors: list[str] = []
        self.loaded = trio.Event()

    async def reader(self) -> None:
        while True:
            msg = json.loads(await self.ws.get_message())
            if "id" in msg:
                event, box = self.waiting.pop(msg["id"])
                box.append(msg)
                event.set()
                continue
            method, params = msg.get("method"), msg.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                          for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.errors.append("exception: " + str(details.get("exception", {}).get("description")
                                                       or details.get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
            elif method == "Page.loadEventFired":
                self.loaded.set()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        event, box = trio.Event(), []
        self.waiting[ident] = (event, box)
        await self.ws.send_message(json.dumps({"id": ident, "method": method, "params": params}))
        with trio.fail_after(30):
            await event.wait()
        reply = box[0]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})  # type: ignore[no-any-return]

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        with trio.fail_after(timeout):
            while True:
                value = await self.evaluate(expression)
                if value:
                    return value
                await trio.sleep(0.05)

    async def state(self) -> dict[str, str]:
        """The viewer's exposed state: the data- attributes of #state."""
        return await self.evaluate("Object.assign({}, document.getElementById('state').dataset)")  # type: ignore[no-any-return]

    async def screenshot(self, path: Path) -> None:
        data = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(data["data"]))


class Browser:
    def __init__(self, port: int, nursery: trio.Nursery) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.nursery = nursery

    @asynccontextmanager
    async def page(self, url: str) -> AsyncIterator[Page]:
        """A new tab at ``url`` (console errors recorded from the first script on)."""
        async with httpx.AsyncClient() as http:
            target = (await http.put(f"{self.base}/json/new?about:blank")).json()
        async with open_websocket_url(target["webSocketDebuggerUrl"], max_message_size=64 * 2**20) as ws:
            page = Page(ws)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(page.reader)
                for domain in ("Runtime", "Log", "Page"):
                    await page.call(f"{domain}.enable")
                await page.call("Emulation.setDeviceMetricsOverride", width=1400, height=860, deviceScaleFactor=1,
                                mobile=False)
                await page.call("Page.navigate", url=url)
                with trio.fail_after(30):
                    await page.loaded.wait()
                yield page
                nursery.cancel_scope.cancel()
        async with httpx.AsyncClient() as http:
            await http.get(f"{self.base}/json/close/{quote(target['id'])}")


@asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[Browser]:
    """A headless Chromium with a fresh profile in ``profile``; stopped (by its pid) on exit."""
    exe = chromium_path()
    assert exe is not None, "Chromium is not installed (apt-get install -y chromium)"
    profile.mkdir(parents=True, exist_ok=True)
    log = open(profile.parent / f"{profile.name}.stderr", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        port_file = profile / "DevToolsActivePort"
        with trio.fail_after(60):
            while not (port_file.exists() and port_file.read_text().strip()):
                assert proc.poll() is None, f"Chromium exited with {proc.returncode}"
                await trio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        async with trio.open_nursery() as nursery:
            yield Browser(port, nursery)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if Chromium ignores SIGTERM
            proc.kill()
            proc.wait()
        log.close()
