"""The ceiling: a trivial JSON endpoint on WARREN's own stack, Quart-Trio on Hypercorn's trio worker.

``python -m bench.trivial_app [--port 0]`` prints ``TRIVIAL listening on URL`` and serves until SIGTERM
or SIGINT. ``GET /trivial`` answers a small JSON object; ``POST /trivial`` parses a small JSON body and
answers one. Hypercorn is configured and patched exactly as ``warren serve`` did it before its HTTP lane (the
same functions), so the only difference from WARREN is the work each request does.

``--raw`` (informational, a second floor): the same two answers served the way WARREN's HTTP lane serves its hot
routes (warren_sim/http/http_lane.py): straight from ASGI in front of Quart, with Hypercorn's one-write responses
(``hypercorn_fixes.apply_lean_writes``). The judged ceiling is the default (Quart's); this one shows how far the
stack's floor goes down when a request skips Quart.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from typing import Any

import trio
from hypercorn.trio import serve
from quart import Response, request
from quart_trio import QuartTrio

from warren_sim.http.server import hypercorn_config

try:  # the Hypercorn patches warren's start_server applies, when this tree has them: the same stack
    from warren_sim.http import hypercorn_fixes
except ImportError:  # pragma: no cover - older trees
    hypercorn_fixes = None  # type: ignore[assignment]


def create_app() -> QuartTrio:
    app = QuartTrio("trivial")
    app.config["RESPONSE_TIMEOUT"] = None

    @app.route("/trivial", methods=["GET"])
    async def get() -> Response:
        return Response(json.dumps({"ok": True, "n": 1}), content_type="application/json")

    @app.route("/trivial", methods=["POST"])
    async def post() -> Response:
        body = json.loads(await request.get_data())
        return Response(json.dumps({"ok": True, "keys": len(body)}), content_type="application/json")

    return app


def raw_lane(app: QuartTrio) -> QuartTrio:
    """``app`` with ``/trivial`` answered straight from ASGI (the ``--raw`` floor): the same JSON as the routes."""
    inner = app.asgi_app

    async def lane(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/trivial" or scope["method"] not in ("GET", "POST"):
            await inner(scope, receive, send)
            return
        if scope["method"] == "GET":
            body = json.dumps({"ok": True, "n": 1}).encode()
        else:
            data = b""
            while True:
                msg = await receive()
                if msg["type"] != "http.request":
                    return
                data += msg.get("body", b"")
                if not msg.get("more_body", False):
                    break
            body = json.dumps({"ok": True, "keys": len(json.loads(data))}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    app.asgi_app = lane  # type: ignore[method-assign]
    return app


async def main_async(host: str, port: int, raw: bool = False) -> None:
    if hypercorn_fixes is not None:
        hypercorn_fixes.apply()
        if raw and hasattr(hypercorn_fixes, "apply_lean_writes"):
            hypercorn_fixes.apply_lean_writes()
    config = hypercorn_config(host, port, 1.0)
    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            app = raw_lane(create_app()) if raw else create_app()
            binds = await nursery.start(functools.partial(serve, app, config, shutdown_trigger=stop.wait))
            url = next((b for b in binds if b.startswith("http://")), binds[0])
            print(f"TRIVIAL listening on {url}", flush=True)
            async for _ in signals:
                stop.set()
                break


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.trivial_app")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--raw", action="store_true",
                   help="informational floor: /trivial straight from ASGI, one-write responses (see the module)")
    args = p.parse_args(argv)
    trio.run(main_async, args.host, args.port, args.raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
