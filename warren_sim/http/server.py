"""Running the app on Hypercorn's trio worker inside our own ``trio.run``.

Because Hypercorn runs in our trio run, the process clock (real or ``--rate R``) drives every
timeout, ours and Hypercorn's. Hypercorn's own timeouts are connection hygiene, not simulation
time, so they are scaled by the rate to stay the same in real seconds. ``start_server`` is the one
start path shared by ``warren serve`` and the end-to-end tests; it reports the bound URL the way
Hypercorn's ``serve`` does, through ``task_status``.
"""

from __future__ import annotations

import functools
import gc
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


def hypercorn_config(host: str, port: int, rate: float, errorlog: Any = "-") -> HypercornConfig:
    hc = HypercornConfig()
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hc.keep_alive_timeout = 5.0 * rate
    hc.graceful_timeout = 3.0 * rate
    hc.read_timeout = None
    hc.h11_max_incomplete_size = 16 * 1024  # request line + headers are bounded
    hc.accesslog = None
    hc.errorlog = errorlog  # "-": its own text lines on stderr; a Logger (warren serve --log-format json): that one
    return hc


# The cycle collector's thresholds while serving (Python's default: 700, 10, 10). A server holds a big, long-lived
# heap (a 10,000-agent run's world, its leases, 10,000 parked long-polls) and a batch allocates in bursts
# (10,000 observations, records and envelopes at once); with the defaults, each burst sets off full passes over
# the whole heap, 100-300 ms each at 10,000 agents, in the middle of publishing and replying (bench scale:
# multi-agent polls' wake p99 860-880 ms with the defaults, 570-590 ms with these, alternated on one machine).
# Reference cycles are still collected, in young passes of 20,000 objects (a few ms) and rarer full ones.
SERVER_GC_THRESHOLDS = (20_000, 20, 20)


async def start_server(config: ServerConfig, host: str = "127.0.0.1", port: int = 0, *,
                       gc_thresholds: tuple[int, int, int] | None = None, errorlog: Any = "-",
                       task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until ``RunningServer.shutdown()``; ``task_status.started(RunningServer)``.

    ``gc_thresholds``: the cycle collector's while serving, restored when the server stops (``warren serve`` and
    the bench's server pass ``SERVER_GC_THRESHOLDS``; a server inside a test process keeps the process's own).
    With them, what exists once the app is made (modules, classes, the app: ~56,000 objects, which live as long
    as the process) is frozen out of the collector's sight, so a full pass no longer walks them again (30 ms a
    pass here); unfrozen when the server stops."""
    # idle keep-alive connections close again after a request; writes are bounded (see the module)
    hypercorn_fixes.apply(send_timeout=config.send_timeout_s * config.rate)
    hypercorn_fixes.apply_lean_writes()  # one write per fixed-length response
    thresholds = gc.get_threshold()
    if gc_thresholds is not None:
        gc.set_threshold(*gc_thresholds)
    app = create_app(config)
    if gc_thresholds is not None:
        gc.freeze()
    app.config["BODY_TIMEOUT"] = config.body_timeout_s * config.rate  # real seconds, on the rated clock
    hc = hypercorn_config(host, port, config.rate, errorlog)
    stop = trio.Event()
    running: RunningServer | None = None
    try:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve, app, hc, shutdown_trigger=stop.wait))
            url = next((b for b in binds if b.startswith("http://")), binds[0])
            running = RunningServer(url, app, stop)
            task_status.started(running)
    finally:
        gc.set_threshold(*thresholds)
        if gc_thresholds is not None:
            gc.unfreeze()
        if running is not None:
            running.stopped.set()
