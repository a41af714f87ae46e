"""The viewer's routes: ``GET /`` (this server's runs), ``GET /runs/{run}`` (one run) and the texts of observations.

Both pages are the one static file ``viewer.html`` (no build step, nothing fetched from elsewhere); it
reads the warren-agent/0 API itself (``GET /v1/runs``, the SSE stream ``GET /v1/runs/{run}/events``).
The journal holds no observation texts (engine observations render their text lazily, only for those
who read it), so ``GET /runs/{run}/observations/{id}`` rebuilds one by replaying the run's flushed
records in a worker thread (the engine is deterministic: it is the text the agent read), and caches it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import trio
from quart import Response

from ..runtime.errors import RunError
from ..runtime.rebuild import observation_texts
from ..runtime.stored import journal_of
from .state import WarrenApp

#: The page may run only its own inline script and talk only to this server: nothing from a CDN.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'")
TEXT_CACHE = 4096  # observation texts kept per server


@lru_cache(maxsize=1)
def viewer_page() -> str:
    return resources.files(__package__).joinpath("viewer.html").read_text(encoding="utf-8")


def _page() -> Response:
    return Response(viewer_page(), content_type="text/html; charset=utf-8",
                    headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache",
                             "X-Content-Type-Options": "nosniff"})


def register_viewer_routes(app: WarrenApp) -> None:
    texts: dict[tuple[str, str], str] = {}
    manager = app.warren.runs

    @app.route("/", methods=["GET"])
    async def runs_page() -> Response:
        return _page()

    @app.route("/runs/<run_id>", methods=["GET"])
    async def run_page(run_id: str) -> Response:
        manager().get(run_id)  # an unknown run is a 404 that names the known ones
        return _page()

    @app.route("/runs/<run_id>/observations/<observation_id>", methods=["GET"])
    async def observation_text(run_id: str, observation_id: str) -> Response:
        run = manager().get(run_id)
        key = (run_id, observation_id)
        if key not in texts:
            journal = await journal_of(run)  # an ended run's file is parsed in a worker thread
            records = journal.records[:journal.flushed]
            if not any(r.get("kind") == "observation" and r.get("observation_id") == observation_id for r in records):
                raise RunError(404, f"{run_id} has no observation {observation_id!r} (yet); ids look like "
                               "engineer-1#3 and come from the journal's observation records")
            found = await trio.to_thread.run_sync(observation_texts, records, {observation_id})
            if observation_id not in found:
                raise RunError(404, f"the replay of {run_id} did not reach {observation_id}")
            if len(texts) >= TEXT_CACHE:
                texts.pop(next(iter(texts)))
            texts[key] = found[observation_id]
        body = {"run_id": run_id, "observation_id": observation_id, "text": texts[key]}
        return Response(json.dumps(body, ensure_ascii=False), content_type="application/json")
