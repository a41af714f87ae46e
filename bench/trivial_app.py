"""The ceiling: a trivial JSON endpoint on WARREN's own stack, Quart-Trio on Hypercorn's trio worker.

``python -m bench.trivial_app [--port 0]`` prints ``TRIVIAL listening on URL`` and serves until SIGTERM
or SIGINT. ``GET /trivial`` answers a small JSON object; ``POST /trivial`` parses a small JSON body and
answers one. Hypercorn is configured and patched exactly as ``warren serve`` does it (the same
functions), so the only difference from WARREN is the work each request does.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys

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


async def main_async(host: str, port: int) -> None:
    if hypercorn_fixes is not None:
        hypercorn_fixes.apply()
    config = hypercorn_config(host, port, 1.0)
    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve, create_app(), config, shutdown_trigger=stop.wait))
            url = next((b for b in binds if b.startswith("http://")), binds[0])
            print(f"TRIVIAL listening on {url}", flush=True)
            async for _ in signals:
                stop.set()
                break


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.trivial_app")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    trio.run(main_async, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
