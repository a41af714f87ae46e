"""The OpenAPI 3.1 description of warren-agent/0 over HTTP, built from one table of endpoints.

Why a table (:data:`ENDPOINTS`) and not a hand-written YAML file: the same rows say, for every endpoint,
which statuses it can answer and which JSON Schema each body follows, and three readers need exactly that:
:func:`openapi_document` (served at ``GET /v1/openapi.json``), the response checker of the tests and of
``warren conformance`` (:func:`expected_response`), and the test that every route of the app is described
here. Bodies refer to the normative schemas of :mod:`warren_sim.protocol.schema_registry`, copied into
``components/schemas`` with their ``urn:`` references rewritten to ``#/components/schemas/...``.

Every ``/v1`` response carries ``X-Warren-Protocol: warren-agent/0``; a request whose header names another
protocol gets 409 from every endpoint. Error bodies are ``application/problem+json``. ``default`` covers
what any route may answer for a request it cannot route (405) and a server bug (500).
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from warren_sim import __version__
from warren_sim.protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_HEADER, PROTOCOL_VERSION
from warren_sim.protocol.schema_registry import ID_PREFIX, load_schema, schema_names
from warren_sim.protocol.strict_json import MAX_SAFE_INTEGER as MAX_SAFE

__all__ = ["ENDPOINTS", "Endpoint", "Link", "Param", "expected_response", "find_endpoint", "openapi_document"]

JSON = "application/json"
SCHEMA_JSON = "application/schema+json"
NDJSON = "application/x-ndjson"
SSE = "text/event-stream"

#: Why each error status happens, phrased for the response descriptions.
ERROR_TEXT: dict[int, str] = {
    400: "Bad query parameter or body (malformed or non-strict JSON, a field of the wrong type); the detail says which.",
    401: "No ?lease= was sent; claim the agent to get one.",
    403: "The lease token does not hold this agent (wrong, released or expired), or the request came from a "
         "web page of another origin (its Origin header is not the server's own nor one of --allow-origin).",
    415: "The body was not sent as Content-Type: application/json.",
    404: "Unknown run, agent, scenario, command or schema.",
    409: "The X-Warren-Protocol request header (or protocol=) names another protocol, the agent is held by "
         "another live lease, or it is not a controlled agent of the run.",
    410: "The run has ended; the detail names its terminal status, and the run_status member carries it.",
    408: "The request body did not arrive in time.",
    413: "The body is larger than 64 KiB.",
    422: "command_id or observation_id is missing or not a string (an empty command_id too): such a command "
         "cannot be deduplicated.",
    429: "A server cap was reached (live runs per server, concurrent long-polls per lease, spectators per run); "
         "the Retry-After header says when trying again makes sense.",
}


NO_CONTENT = {
    "pollObservation": "No observation with seq > after came within wait seconds; poll again.",
    "pollObservations": "No polled agent got an observation newer than its after within wait seconds; poll again.",
    "streamEvents": "The run has ended and the reconnecting reader has every record: stop reconnecting.",
}


@attrs.frozen
class Param:
    """A query parameter (``in: query``); ``json``: its value is JSON text (``content: application/json``, so a
    generator sends JSON of ``schema``, not any string)."""

    name: str
    schema: dict[str, Any]
    description: str
    required: bool = False
    json: bool = False


@attrs.frozen
class Link:
    """An OpenAPI link from an operation's success response to another operation: ``parameters`` maps that
    operation's parameters to runtime expressions (``$response.body#/run_id``, ``$request.path.agent_id``), so a
    client (or schemathesis's stateful phase) goes from a created run to its operations, from a claim to its
    agent's."""

    name: str
    operation_id: str
    parameters: tuple[tuple[str, str], ...]
    description: str = ""
    request_body: Any = None  # a literal body (or runtime expression) for the target operation


@attrs.frozen
class Endpoint:
    """One operation: its success status and body schema, the error statuses it can answer, its inputs."""

    method: str
    path: str
    operation_id: str
    summary: str
    status: int
    schema: str | None
    errors: tuple[int, ...]
    media: str = JSON
    query: tuple[Param, ...] = ()
    body: str | None = None
    body_required: bool = False
    leased: bool = False
    also: tuple[int, ...] = ()  # more success statuses without a body (204)
    description: str = ""
    links: tuple[Link, ...] = ()  # from the success response

    @property
    def all_errors(self) -> tuple[int, ...]:
        """``errors`` plus what every endpoint may answer: 403 (a foreign Origin), 415 (a body that is not JSON)."""
        extra = (403,) + ((415,) if self.body is not None or self.method == "POST" else ())
        return tuple(sorted(set(self.errors) | set(extra)))

    @property
    def statuses(self) -> tuple[int, ...]:
        return (self.status, *self.also, *self.all_errors)


_LEASE = Param("lease", {"type": "string"}, "a live lease token of this agent, to resume it (same token, outstanding "
               "envelope redelivered); leave it out for a new claim")
_PROPOSED = Param("proposed_lease", {"type": "string", "pattern": "^[A-Za-z0-9_-]{32,128}$"},
                  "a WARREN extension: the token a fresh lease gets, made by the client at random; the same claim "
                  "sent again (its answer lost) resumes that lease, where a server-made token would be lost with "
                  "the answer. A live lease it names is resumed as with lease; another value gets 400")
_PROTO = Param("protocol", {"type": "string", "const": PROTOCOL_VERSION},
               "the protocol the client speaks (alternative to the header); another value gets 409")
_AGENT = "/v1/runs/{run_id}/agents/{agent_id}"

# The links (Endpoint.links): from a run (created or read) to its operations and its first agent's claim; from a
# claim to the agent's leased operations; from a receipt to its re-read. A run's agents/0 is controlled when the
# run controls it ("all", or a list naming it first among the scenario's agents).
_RUN_ID = ("run_id", "$response.body#/run_id")
_FIRST_AGENT = ("agent_id", "$response.body#/agents/0/agent_id")
_RUN_LINKS = (
    Link("GetRun", "getRun", (_RUN_ID,), "the run's status, agents and result"),
    Link("StartRun", "startRun", (_RUN_ID,), "start it without waiting for every claim"),
    Link("GetJournal", "getJournal", (_RUN_ID,), "its journal so far"),
    Link("StreamEvents", "streamEvents", (_RUN_ID,), "its journal, live"),
    Link("ClaimAgents", "claimAgents", (_RUN_ID,), "claim several of its controlled agents"),
    Link("ClaimFirstAgent", "claimAgent", (_RUN_ID, _FIRST_AGENT), "claim its first agent (when controlled)"),
    Link("CancelRun", "cancelRun", (_RUN_ID,), "cancel it"),
)
_RUN_READ_LINKS = tuple(link for link in _RUN_LINKS if link.operation_id not in ("getRun", "cancelRun"))
# a run every agent of which is remote, with an hour per decision: what a client exploring the API needs next
_ALL_REMOTE: dict[str, Any] = {"controlled_agents": "all", "npc_policy": "solution", "pace": None, "decision_deadline_s": 3600,
               "params": {}}
_SCENARIO_LINKS = (
    Link("CreateRun", "createRun", (("scenario", "$response.body#/scenarios/0/name"),),
         "a run of the first scenario with every agent remote", _ALL_REMOTE),
    Link("DescribeScenario", "describeScenario", (("name", "$response.body#/scenarios/0/name"),),
         "the first scenario's roles, agents, objectives and parameters"),
)
_LIST_LINKS = (Link("GetFirstRun", "getRun", (("run_id", "$response.body#/runs/0/run_id"),), "the first run"),)
_LEASED = (("run_id", "$request.path.run_id"), ("agent_id", "$request.path.agent_id"),
           ("lease", "$response.body#/lease"))
_CLAIM_LINKS = (
    Link("GetBriefing", "getBriefing", _LEASED, "the agent's briefing, with the new lease"),
    Link("PollObservation", "pollObservation", _LEASED, "its next observation"),
    Link("SubmitCommand", "submitCommand", _LEASED, "answer its observation"),
    Link("ReleaseAgent", "releaseAgent", _LEASED, "give it back"),
)
_RECEIPT_LINKS = (
    Link("GetReceipt", "getReceipt", (("run_id", "$request.path.run_id"), ("agent_id", "$request.path.agent_id"),
                                      ("lease", "$request.query.lease"), ("command_id", "$response.body#/command_id")),
         "the receipt again, with its outcome as it stands"),
)

#: Every HTTP endpoint of warren-agent/0 as this server implements it (the WebSocket stream is not HTTP).
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/v1", "getServerInfo", "The protocol, the server and its endpoints", 200, "server_info",
             (409,)),
    Endpoint("GET", "/v1/scenarios", "listScenarios", "List scenarios", 200, "scenario_list", (409,),
             links=_SCENARIO_LINKS),
    Endpoint("GET", "/v1/scenarios/{name}", "describeScenario",
             "Describe a scenario: roles, agents, objectives, parameters and its layout", 200, "scenario",
             (400, 404, 409),
             query=(Param("params", {"type": "object"}, 'the scenario parameters as a JSON object, typed like the '
                          'run creation body\'s params (e.g. {"agents": 1000}); the layout follows them',
                          json=True),)),
    Endpoint("POST", "/v1/runs", "createRun", "Create a run", 201, "run", (400, 404, 408, 409, 413, 429),
             query=(Param("scenario", {"type": "string", "minLength": 1}, "scenario name", required=True),
                    Param("seed", {"type": "integer", "default": 0, "minimum": -MAX_SAFE, "maximum": MAX_SAFE},
                          "the run's seed")),
             body="run_create", links=_RUN_LINKS,
             description="Agent control is explicit: controlled_agents are remote, npc_policy drives the rest. "
                         "The run stays created until every controlled agent is claimed (or POST .../start)."),
    Endpoint("POST", "/v1/runs/{run_id}/fork", "forkRun",
             "Fork a run at a cursor of its journal: a new run from the last batch boundary at or before it", 201,
             "run", (400, 404, 408, 409, 413, 429), body="run_fork", body_required=True, links=_RUN_LINKS,
             description="The body is the run creation body (the same fields and defaults) plus cursor; the world "
                         "is the parent's (params stay empty). The parent may be live or ended, known by its "
                         "journal on disk after a restart. The new run's view has forked_from {run_id, cursor, "
                         "batch_cursor}; its NPC policies are brought to the fork point, its controlled agents "
                         "are claimed as in any run. 400: a cursor below 0 or past the journal's end; 409: a "
                         "journal that cannot bring the fork there (cut short or edited) or a policy that cannot "
                         "be brought to the fork point; nothing is created on an error (docs/fork.md)."),
    Endpoint("GET", "/v1/runs", "listRuns", "List runs", 200, "run_list", (409,), links=_LIST_LINKS),
    Endpoint("GET", "/v1/runs/{run_id}", "getRun", "A run's status, sim time, agents, objectives and result", 200,
             "run", (404, 409), links=_RUN_READ_LINKS),
    Endpoint("DELETE", "/v1/runs/{run_id}", "cancelRun", "Cancel a run (no-op on an ended run)", 200, "run",
             (404, 409)),
    Endpoint("POST", "/v1/runs/{run_id}/start", "startRun",
             "Start a created run now, whether or not every controlled agent is claimed", 200, "run",
             (404, 409, 410)),
    Endpoint("GET", "/v1/runs/{run_id}/journal", "getJournal", "The run's journal so far (JSON Lines)", 200, None,
             (400, 404, 409), media=NDJSON,
             query=(Param("since", {"type": "integer", "minimum": -1, "maximum": MAX_SAFE, "default": -1},
                          "only the records after this cursor (-1: all)"),)),
    Endpoint("GET", "/v1/runs/{run_id}/events", "streamEvents",
             "The run's journal records, live, as Server-Sent Events (id: cursor, event: kind, data: record)",
             200, None, (400, 404, 409, 429), media=SSE, also=(204,),
             query=(Param("since", {"type": "integer", "minimum": -1, "maximum": MAX_SAFE, "default": -1},
                          "send the records after this cursor (-1: all); a Last-Event-ID header wins"),),
             description="The same frames as the spectator WebSocket WS /v1/runs/{run_id}/stream. A reconnect "
                         "(Last-Event-ID) to an ended run with nothing left to send gets 204."),
    Endpoint("POST", "/v1/runs/{run_id}/claim", "claimAgents",
             "Claim several controlled agents in one request, one fresh lease each (a WARREN extension)", 200,
             "bulk_claim_response", (400, 404, 408, 409, 410, 413), query=(_PROTO,), body="bulk_claim",
             body_required=True,
             description="agents: a list of ids, \"all\" or {\"role\": ROLE}, among the run's controlled agents. "
                         "All or none: 409 (nothing claimed) when one of them is held by a live lease or is not "
                         "controlled; resume a held agent with its own token at POST .../agents/{agent_id}/claim. "
                         "The run starts once every controlled agent was claimed, as with single claims."),
    Endpoint("POST", "/v1/runs/{run_id}/observations", "pollObservations",
             "Long-poll several agents of the run at once, each with its own lease (a WARREN extension)", 200,
             "observation_batch", (400, 401, 403, 404, 408, 409, 410, 413, 429), body="multi_poll",
             body_required=True, also=(204,),
             query=(Param("wait", {"type": "number", "minimum": 0, "default": 0},
                          "seconds to wait for at least one envelope (capped by the server); 204 when none came"),),
             description="The body's leases authenticate (and refresh) every agent's lease; one that is missing, "
                         "wrong or expired refuses the whole poll (401/403, naming the agent). The reply lists "
                         "every polled agent's outstanding envelope newer than its after, narrowed to the body's "
                         "parts when it names them (as the WebSocket binding's agent.subscribe)."),
    Endpoint("POST", f"{_AGENT}/claim", "claimAgent", "Claim a controlled agent, or resume a live lease", 200,
             "claim_response", (400, 404, 409, 410), query=(_LEASE, _PROPOSED, _PROTO),
             links=_CLAIM_LINKS,
             description="409 while another live lease holds the agent or when it is not controlled; 410 once "
                         "the run has ended; 400 for a proposed_lease that could not be a token."),
    Endpoint("POST", f"{_AGENT}/release", "releaseAgent", "Release the agent now", 200, "release_response",
             (401, 403, 404, 409), leased=True),
    Endpoint("GET", f"{_AGENT}/briefing", "getBriefing", "The agent's briefing (cache it by revision)", 200,
             "briefing", (401, 403, 404, 409), leased=True),
    Endpoint("GET", f"{_AGENT}/observations", "pollObservation",
             "The outstanding observation with seq > after, waiting up to wait seconds", 200, "envelope",
             (400, 401, 403, 404, 409, 410, 429), leased=True, also=(204,),
             query=(Param("after", {"type": "integer", "minimum": -1, "maximum": MAX_SAFE, "default": -1},
                          "the highest seq already received (-1: none)"),
                    Param("wait", {"type": "number", "minimum": 0, "default": 0},
                          "seconds to wait for one (capped by the server); 204 when none came")),
             description="Delivery is at-least-once: after a reconnect, after=-1 redelivers the outstanding "
                         "envelope."),
    Endpoint("POST", f"{_AGENT}/commands", "submitCommand", "Answer an observation with one command", 200,
             "receipt", (400, 401, 403, 404, 408, 409, 413, 422), leased=True, body="command",
             body_required=True, links=_RECEIPT_LINKS,
             query=(Param("wait", {"type": "number", "minimum": 0},
                          "a WARREN extension: after an accepted (or duplicate) command, wait up to this many "
                          "seconds (capped by the server) for the agent's next envelope and return it in the "
                          "receipt's next_observation (null if none came); leave it out for the plain receipt"),),
             description="Every verdict is a 200 receipt: accepted, duplicate (the command_id was already "
                         "accepted; the original receipt's content), rejected, stale or expired. With ?wait= the "
                         "receipt also carries next_observation: one request per decision instead of two."),
    Endpoint("GET", f"{_AGENT}/commands/{{command_id}}", "getReceipt",
             "A command's receipt with its current outcome", 200, "receipt", (401, 403, 404, 409), leased=True),
    Endpoint("GET", "/v1/schemas", "listSchemas", "The normative JSON Schemas", 200, "schema_list", (409,)),
    Endpoint("GET", "/v1/schemas/{name}", "getSchema", "One JSON Schema (draft 2020-12)", 200, None, (404, 409),
             media=SCHEMA_JSON),
    Endpoint("GET", "/v1/openapi.json", "getOpenAPI", "This document", 200, None, (409,)),
)


def _path_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile("".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + r"\Z")


_MATCHERS = [(_path_regex(e.path), e) for e in ENDPOINTS]


def find_endpoint(method: str, path: str) -> Endpoint | None:
    """The endpoint a request goes to (``"GET"``, ``"/v1/runs/run-1"``), or None if none is described."""
    for regex, endpoint in _MATCHERS:
        if endpoint.method == method.upper() and regex.match(path):
            return endpoint
    return None


def expected_response(method: str, path: str, status: int) -> tuple[str | None, str | None] | None:
    """What a response must look like: ``(media type, schema name)``, or None when the status is not one this
    endpoint can answer. A 204 has no body: ``(None, None)``; an error is ``(problem+json, "problem")``.
    Raises ``LookupError`` for a request no endpoint describes."""
    endpoint = find_endpoint(method, path)
    if endpoint is None:
        raise LookupError(f"no warren-agent/0 endpoint is {method} {path}")
    if status == endpoint.status:
        return endpoint.media, endpoint.schema
    if status in endpoint.also:
        return None, None
    if status in endpoint.all_errors:
        return PROBLEM_CONTENT_TYPE, "problem"
    return None


# --------------------------------------------------------------------------------------------- the document


def _component(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _rewrite(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("$schema", "$id"):
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith(ID_PREFIX):
                name, _, pointer = value[len(ID_PREFIX):].partition("#")  # a part of a schema: run_create#/...
                value = "#/components/schemas/" + _component(name) + pointer
            out[key] = _rewrite(value)
        return out
    if isinstance(node, list):
        return [_rewrite(v) for v in node]
    return node


def _error_response(status: int) -> dict[str, Any]:
    return {"$ref": f"#/components/responses/Problem{status}"}


def _operation(e: Endpoint) -> dict[str, Any]:
    headers = {PROTOCOL_HEADER: {"$ref": "#/components/headers/Protocol"}}
    ok: dict[str, Any] = {"description": e.summary, "headers": headers}
    if e.media == NDJSON:
        ok["content"] = {NDJSON: {"schema": {"type": "string", "description": "one JSON record per line"}}}
    elif e.media == SSE:
        # OpenAPI 3.1: under text/event-stream, ``schema`` describes each event (3.2 moved that to itemSchema)
        ok["content"] = {SSE: {"schema": {
            "type": "object", "description": "One Server-Sent Event: id = the record's cursor (absent on control "
            "frames), event = its kind, data = the record as JSON",
            "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": {"type": "string"},
                           "retry": {"type": "integer"}}}}}
    elif e.schema is not None:
        ok["content"] = {e.media: {"schema": {"$ref": f"#/components/schemas/{_component(e.schema)}"}}}
    else:
        ok["content"] = {e.media: {"schema": {"type": "object"}}}
    if e.links:
        ok["links"] = {link.name: {"operationId": link.operation_id, "parameters": dict(link.parameters),
                                   **({"requestBody": link.request_body} if link.request_body is not None else {}),
                                   **({"description": link.description} if link.description else {})}
                       for link in e.links}
    responses: dict[str, Any] = {str(e.status): ok}
    for extra in e.also:
        responses[str(extra)] = {"description": NO_CONTENT.get(e.operation_id, "No content"), "headers": headers}
    for status in e.all_errors:
        responses[str(status)] = _error_response(status)
    responses["default"] = {"$ref": "#/components/responses/ProblemDefault"}
    op: dict[str, Any] = {"operationId": e.operation_id, "summary": e.summary}
    if e.description:
        op["description"] = e.description
    params: list[dict[str, Any]] = [{"$ref": "#/components/parameters/ProtocolHeader"}]
    for name in re.findall(r"\{([^}]+)\}", e.path):
        params.append({"name": name, "in": "path", "required": True, "schema": {"type": "string"}})
    for q in e.query:
        param = {"name": q.name, "in": "query", "required": q.required, "description": q.description}
        if q.json:
            param["content"] = {JSON: {"schema": q.schema}}
        else:
            param["schema"] = q.schema
        params.append(param)
    op["parameters"] = params
    if e.body is not None:
        op["requestBody"] = {"required": e.body_required, "content": {
            JSON: {"schema": {"$ref": f"#/components/schemas/{_component(e.body)}"}}}}
    if e.leased:
        op["security"] = [{"lease": []}]
    op["responses"] = responses
    return op


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of warren-agent/0 (``servers`` names ``server_url`` when given)."""
    paths: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e)
    problem_media = {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    header_ref = {PROTOCOL_HEADER: {"$ref": "#/components/headers/Protocol"}}
    responses = {f"Problem{status}": {"description": text, "headers": header_ref, "content": problem_media}
                 for status, text in ERROR_TEXT.items()}
    responses["ProblemDefault"] = {"description": "Any other refusal (405 for a method the path does not "
                                   "allow) or a server bug (500)", "headers": header_ref, "content": problem_media}
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "warren-agent/0",
            "version": __version__,
            "summary": "Remote agent protocol of WARREN: HTTP + long-polling",
            "description": (
                "How an external client controls agents of a running WARREN simulation. Structured data is "
                "authoritative; one unanswered observation per agent; delivery is at-least-once and acceptance "
                "exactly-once (client-minted command_ids); leases, not sessions. Every /v1 response carries "
                f"{PROTOCOL_HEADER}: {PROTOCOL_VERSION}; a request naming another protocol in that header gets "
                "409. Errors are application/problem+json with a teaching detail. Two WebSocket bindings are not "
                "described here (OpenAPI has no words for them): WS /v1/agent (the agent protocol as JSON-RPC 2.0) "
                "and WS /v1/runs/{run_id}/stream?since= (spectator frames, as GET .../events)."),
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "paths": paths,
        "components": {
            "schemas": {_component(n): _rewrite(load_schema(n)) for n in schema_names()},
            "responses": responses,
            "headers": {"Protocol": {"description": "the protocol of the response",
                                     "schema": {"type": "string", "const": PROTOCOL_VERSION}}},
            "parameters": {"ProtocolHeader": {
                "name": PROTOCOL_HEADER, "in": "header", "required": False,
                "description": "the protocol the client speaks; when present and not warren-agent/0 the server "
                               "answers 409",
                "schema": {"type": "string", "const": PROTOCOL_VERSION}}},
            "securitySchemes": {"lease": {
                "type": "apiKey", "in": "query", "name": "lease",
                "description": "the token of a live lease on the agent (POST .../claim); any authenticated "
                               "request refreshes its TTL; missing: 401, wrong or expired: 403"}},
        },
    }
    if server_url:
        doc["servers"] = [{"url": server_url.rstrip("/")}]
    return doc
