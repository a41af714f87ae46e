"""Running the app on Hypercorn's trio worker inside our own ``trio.run``.

Because Hypercorn runs in our trio run, the process clock (real or ``--rate R``) drives every
timeout, ours and Hypercorn's. Hypercorn's own timeouts are connection hygiene, not simulation
time, so they are scaled by the rate to stay the same in real seconds. ``start_server`` is the one
start path shared by ``warren serve`` and the end-to-end tests; it reports the bound URL the way
Hypercorn's ``serve`` does, through ``task_status``.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from ..runtime.manager import ServerConfig
from . import hypercorn_fixes
from .app import create_app
from .state import WarrenApp


@attrs.define(eq=False)
class RunningServer:
    url: str
    app: WarrenApp
    shutdown_event: trio.Event
    stopped: trio.Event = attrs.Factory(trio.Event)

    def shutdown(self) -> None:
        """Answer long-polls (their runs end as cancelled, journaled), then stop Hypercorn."""
        manager = self.app.warren.manager
        if manager is not None:
            manager.shutdown()
        self.shutdown_event.set()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def hypercorn_config(host: str, port: int, rate: float) -> HypercornConfig:
    hc = HypercornConfig()
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hc.keep_alive_timeout = 5.0 * rate
    hc.graceful_timeout = 3.0 * rate
    hc.read_timeout = None
    hc.h11_max_incomplete_size = 16 * 1024  # request line + headers are bounded
    hc.accesslog = None
    hc.errorlog = "-"
    return hc


async def start_server(config: ServerConfig, host: str = "127.0.0.1", port: int = 0, *,
                       task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until ``RunningServer.shutdown()``; ``task_status.started(RunningServer)``."""
    # idle keep-alive connections close again after a request; writes are bounded (see the module)
    hypercorn_fixes.apply(send_timeout=config.send_timeout_s * config.rate)
    hypercorn_fixes.apply_lean_writes()  # one write per fixed-length response
    app = create_app(config)
    app.config["BODY_TIMEOUT"] = config.body_timeout_s * config.rate  # real seconds, on the rated clock
    hc = hypercorn_config(host, port, config.rate)
    stop = trio.Event()
    running: RunningServer | None = None
    try:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve, app, hc, shutdown_trigger=stop.wait))
            url = next((b for b in binds if b.startswith("http://")), binds[0])
            running = RunningServer(url, app, stop)
            task_status.started(running)
    finally:
        if running is not None:
            running.stopped.set()
