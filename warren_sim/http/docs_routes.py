"""Routes that describe the protocol: ``GET /v1/schemas``, ``GET /v1/schemas/{name}``, ``GET /v1/openapi.json``.

Kept apart from the run routes (:mod:`warren_sim.http.app` registers them with one call) because they serve static
descriptions, not runs. The protocol header and problem bodies come from the app's hooks like everywhere.
"""

from __future__ import annotations

import json
from typing import Any

from quart import Response, request

from ..protocol import PROBLEM_CONTENT_TYPE
from ..protocol.models import problem
from ..protocol.openapi import SCHEMA_JSON, openapi_document
from ..protocol.schema_registry import UnknownSchemaError, load_schema, schema_id, schema_names

__all__ = ["register_docs_routes"]


def _json(obj: Any, status: int = 200, content_type: str = "application/json") -> Response:
    return Response(json.dumps(obj, ensure_ascii=False), status=status, content_type=content_type)


def register_docs_routes(app: Any) -> None:
    """Add the schema and OpenAPI routes to ``app``."""

    @app.route("/v1/schemas", methods=["GET"])
    async def list_schemas() -> Response:
        out = []
        for name in schema_names():
            schema = load_schema(name)
            out.append({"name": name, "id": schema_id(name), "title": schema.get("title", name),
                        "url": f"/v1/schemas/{name}"})
        return _json({"schemas": out})

    @app.route("/v1/schemas/<name>", methods=["GET"])
    async def get_schema(name: str) -> Response:
        stem = name[: -len(".json")] if name.endswith(".json") else name
        try:
            schema = load_schema(stem)
        except UnknownSchemaError as exc:
            return _json(problem(404, str(exc)), 404, PROBLEM_CONTENT_TYPE)
        return _json(schema, content_type=SCHEMA_JSON)

    @app.route("/v1/openapi.json", methods=["GET"])
    async def get_openapi() -> Response:
        return _json(openapi_document(request.host_url))
