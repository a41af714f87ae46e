"""The normative JSON Schemas (warren_sim/protocol/schemas), the golden wire fixtures (tests/fixtures/wire), the
OpenAPI 3.1 document and the routes that serve them."""

from __future__ import annotations

import json
import pathlib
import re

import httpx
import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi
from sdkhelpers import in_process

from warren_sim.client import briefing_hash
from warren_sim.http.app import create_app
from warren_sim.protocol.converter import converter
from warren_sim.protocol.models import ClaimResponse, Envelope, Receipt, RunCreate, problem
from warren_sim.protocol.openapi import ENDPOINTS, expected_response, openapi_document
from warren_sim.protocol.response_check import Seen, response_problems
from warren_sim.protocol.schema_registry import (
    load_schema,
    schema_id,
    schema_names,
    validation_errors,
)
from warren_sim.runtime.manager import ServerConfig

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "wire"
VALID = sorted((FIXTURES / "valid").glob("*.json"))
INVALID = sorted((FIXTURES / "invalid").glob("*.json"))
SEED_PARTS = ("run_create", "claim_response", "briefing", "envelope", "command", "receipt")


def schema_of(path: pathlib.Path) -> str:
    return path.name.split(".")[0]


@pytest.mark.parametrize("name", schema_names())
def test_every_schema_is_a_valid_draft_2020_12_schema(name):
    """Each schema file is a valid draft 2020-12 schema whose $id is urn:warren-agent:0:<name>."""
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == schema_id(name) and schema.get("title") and schema.get("description")


def test_every_wire_object_has_a_schema():
    """Schemas exist for every wire object the issue names (and nothing references a missing one)."""
    wanted = {"run_create", "run", "run_list", "claim_response", "release_response", "briefing", "envelope",
              "command", "receipt", "problem", "scenario_list", "scenario", "server_info", "schema_list"}
    assert wanted <= set(schema_names())
    refs = set(re.findall(r'"\$ref": "urn:warren-agent:0:([a-z_]+)"',
                          "".join(json.dumps(load_schema(n)) for n in schema_names())))
    assert refs <= set(schema_names())


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_golden_fixture_validates(path):
    """Every golden fixture fits its schema."""
    assert validation_errors(json.loads(path.read_text(encoding="utf-8")), schema_of(path)) == []


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_is_refused(path):
    """Every invalid fixture breaks its schema (the schemas are not vacuous)."""
    case = json.loads(path.read_text(encoding="utf-8"))
    assert validation_errors(case["instance"], schema_of(path)) != [], case["why"]


def test_seed_worked_example_is_among_the_fixtures():
    """The seed's run body, claim, briefing, envelope, command and both receipts are fixtures; the hash is real."""
    stems = {p.stem for p in VALID}
    for part in SEED_PARTS:
        assert any(s.startswith(f"{part}.seed_example") for s in stems), part
    briefing = json.loads((FIXTURES / "valid" / "briefing.seed_example.json").read_text(encoding="utf-8"))
    assert briefing["content_hash"] == briefing_hash(briefing)
    statuses = {json.loads(p.read_text(encoding="utf-8"))["status"] for p in VALID if p.stem.startswith("receipt.seed")}
    assert statuses == {"accepted", "duplicate"}


def test_protocol_models_fit_the_schemas():
    """What the protocol's attrs models unstructure to fits the corresponding schema."""
    cases = [
        (RunCreate(), "run_create"),
        (RunCreate(["engineer-1"], "none", 1.5, 5.0, {"n": 2}), "run_create"),
        (ClaimResponse("l-x", 1), "claim_response"),
        (Receipt("c-1", "a#0", "accepted", "", "pending", ""), "receipt"),
        (Receipt("c-1", "a#0", "stale", "superseded", "none", ""), "receipt"),
        (Envelope("run-1", "a", "a#3", 3, 10, "start", 1.5, 1,
                  {"agent": "a", "time": 10, "busy": [], "you": {}, "place": {}, "tools": []}, "t", []), "envelope"),
    ]
    for obj, name in cases:
        assert validation_errors(converter.unstructure(obj), name) == [], obj
    for status in (400, 401, 403, 404, 409, 410, 413, 422, 429):
        assert validation_errors(problem(status, "what was wrong, and what would be right"), "problem") == []


def test_response_checker_catches_bad_responses():
    """The checker used by the SDK tests and conformance refuses undocumented statuses, bad media and bad bodies."""
    def seen(method, path, status, body, ctype="application/json"):
        return Seen(method, path, status, httpx.Headers({"content-type": ctype}), json.dumps(body).encode())

    assert response_problems(seen("GET", "/v1/runs", 200, {"runs": []}), validation_errors) == []
    assert response_problems(seen("GET", "/v1/runs", 200, {"runs": [{}]}), validation_errors)
    assert "not one this endpoint answers" in response_problems(seen("GET", "/v1/runs", 410, {}), validation_errors)[0]
    assert "content-type" in response_problems(seen("GET", "/v1/runs/r", 404, problem(404, "x")), validation_errors)[0]
    assert response_problems(seen("GET", "/v1/runs/r", 404, problem(404, "x"), "application/problem+json"),
                             validation_errors) == []
    assert response_problems(seen("GET", "/v1/runs/r", 204, {}), validation_errors)  # no 204 here


def test_openapi_document_passes_the_spec_validator():
    """GET /v1/openapi.json's document is valid OpenAPI 3.1 (openapi-spec-validator)."""
    doc = openapi_document("http://127.0.0.1:8000")
    assert doc["openapi"] == "3.1.0"
    validate_openapi(doc)


def test_openapi_covers_every_http_route_of_the_app():
    """Every HTTP route of create_app (all but the WebSocket ones) is an operation of the document, and back."""
    app = create_app(ServerConfig(data_dir=None))
    routes = set()
    for rule in app.url_map.iter_rules():
        if getattr(rule, "websocket", False) or not rule.rule.startswith("/v1"):
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        routes |= {(method, path) for method in rule.methods - {"HEAD", "OPTIONS"}}
    described = {(e.method, e.path) for e in ENDPOINTS}
    assert routes == described
    paths = openapi_document()["paths"]
    assert {(m.upper(), p) for p, ops in paths.items() for m in ops} == described


def test_every_route_still_builds_its_url_with_lazily_compiled_builders():
    """The app's rules compile their URL builders on first use (http/state.py LazyBuilderRule): what they build
    is what Werkzeug's eagerly compiled builders build, for every route, known and unknown arguments alike."""
    from quart.routing import QuartMap, QuartRule

    app = create_app(ServerConfig(data_dir=None))
    eager = QuartMap()
    lazy = app.url_map.bind("localhost")
    built = 0
    for rule in app.url_map.iter_rules():
        eager.add(QuartRule(rule.rule, endpoint=rule.endpoint, methods=rule.methods, websocket=rule.websocket))
        args = {name: f"x-{name}" for name in rule.arguments}
        for extra in ({}, {"after": "3"}):
            method = "GET" if "GET" in rule.methods else next(iter(rule.methods))
            want = eager.bind("localhost").build(rule.endpoint, {**args, **extra}, method=method,
                                                 url_scheme="ws" if rule.websocket else "http")
            got = lazy.build(rule.endpoint, {**args, **extra}, method=method,
                             url_scheme="ws" if rule.websocket else "http")
            assert got == want
            assert all(value in got for value in args.values()) and ("after=3" in got) == bool(extra)
            built += 1
    assert built >= 2 * 20  # every route, twice


def test_openapi_lists_every_status_with_problem_bodies():
    """The document names 200/201/204/400/401/403/404/409/410/413/422 and every error answers problem+json."""
    doc = openapi_document()
    statuses = {code for ops in doc["paths"].values() for op in ops.values() for code in op["responses"]}
    assert {"200", "201", "204", "400", "401", "403", "404", "409", "410", "413", "422"} <= statuses
    for ops in doc["paths"].values():
        for op in ops.values():
            assert "409" in op["responses"], op["operationId"]  # the protocol header is checked everywhere
            for code, response in op["responses"].items():
                if code == "default" or int(code) >= 400:
                    target = response["$ref"].rsplit("/", 1)[1]
                    content = doc["components"]["responses"][target]["content"]
                    assert list(content) == ["application/problem+json"]
    assert expected_response("POST", "/v1/runs/run-1/agents/a/commands", 422) == ("application/problem+json",
                                                                                   "problem")
    assert expected_response("GET", "/v1/runs/run-1/agents/a/observations", 204) == (None, None)


async def test_schema_and_openapi_routes_serve_the_documents():
    """GET /v1/schemas lists every schema, GET /v1/schemas/{name} serves it, /v1/openapi.json the document."""
    async with in_process() as env, env.client() as client:
        http = client.http
        listing = (await http.get("/v1/schemas")).json()
        assert [s["name"] for s in listing["schemas"]] == list(schema_names())
        for entry in listing["schemas"]:
            response = await http.get(entry["url"])
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/schema+json")
            assert response.json() == load_schema(entry["name"])
        assert (await http.get("/v1/schemas/envelope.json")).json() == load_schema("envelope")
        missing = await http.get("/v1/schemas/nope")
        assert missing.status_code == 404 and "envelope" in missing.json()["detail"]
        doc = (await http.get("/v1/openapi.json")).json()
        assert doc["servers"] == [{"url": "http://warren.test"}]
        validate_openapi(doc)
