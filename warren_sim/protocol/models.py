"""Wire models of warren-agent/0: the shapes that cross HTTP, one attrs class each.

Why attrs classes and not dicts: the server, the client SDK and the tests must agree on field names, order
and types, and a class is the one place that says so. All are frozen (they are values: a receipt or an
envelope never changes after it is made; a new outcome is a new receipt via ``attrs.evolve``). They are
turned into and out of JSON-ready dicts only by the converter in :mod:`warren_sim.protocol.converter`; field
order here is the order on the wire.

Each class names itself for error messages in ``WIRE_NAME`` ("unknown field 'pase' in the run creation body").

Decisions recorded here:

* **Receipt outcome for non-accepted verdicts is** ``"none"``. The seed lists the outcomes of an accepted
  command (``pending -> accepted | rejected``, ``accepted -> completed | interrupted``); a command that was
  rejected, stale or expired was never accepted, so the engine never adjudicates it and it has no engine
  outcome. An empty string would be ambiguous with "not known yet", which is ``"pending"``. So ``outcome`` is
  one of ``pending, accepted, rejected, completed, interrupted`` for ``accepted``/``duplicate`` receipts and
  exactly ``"none"`` (with an empty ``outcome_reason``) for ``rejected``/``stale``/``expired`` ones; the
  constructor enforces this.
* **Problem ``type`` defaults to** ``"about:blank"`` (RFC 9457 section 4.2.1): the HTTP status already
  classifies the error, the teaching ``detail`` says the rest, and we publish no problem-type documents to
  point at. ``title`` then is the status phrase, from a fixed table so it does not change with the Python
  version. A caller may still pass a specific ``type`` URI with its own ``title``.
* **Numbers are strict**: a boolean is never accepted where a number is expected (``true`` is not ``1``),
  integers are accepted for floats, and non-finite floats are refused.
"""

import http
import math
import re
from typing import Any, ClassVar, Literal, get_args

import attrs

__all__ = [
    "OUTCOMES",
    "RECEIPT_STATUSES",
    "RUN_STATUSES",
    "LIVE_RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "AgentView",
    "BulkClaim",
    "BulkClaimResponse",
    "MultiPoll",
    "ClaimResponse",
    "Conflict",
    "ControlledAgents",
    "Envelope",
    "FaultsConfig",
    "FieldValueError",
    "NpcPolicy",
    "NpcPolicyValue",
    "Outcome",
    "ParamValue",
    "Problem",
    "Receipt",
    "ReceiptStatus",
    "RoleSelector",
    "RunCreate",
    "RunFork",
    "RunStatus",
    "RunView",
    "problem",
]

NpcPolicy = Literal["solution", "none"]
#: ``npc_policy`` of the run creation body: one policy for every NPC, or a team ``{KEY: POLICY}`` (KEY a role,
#: an agent id or ``*``; POLICY ``solution``, ``none`` or ``population:NAME``), checked against the scenario
#: when the run is made (``warren_sim.scenarios.policies.npc_team``).
NpcPolicyValue = NpcPolicy | dict[str, str]
NPC_TEAM_POLICY = re.compile(r"(solution|none|population:[A-Za-z0-9_-]{1,64})\Z")
RunStatus = Literal["created", "running", "completed", "failed", "cancelled", "crashed"]
ReceiptStatus = Literal["accepted", "duplicate", "rejected", "stale", "expired"]
Outcome = Literal["pending", "accepted", "rejected", "completed", "interrupted", "none"]
#: A scenario parameter value: one JSON scalar (null is not a value; leave the key out instead).
ParamValue = int | float | str | bool

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
#: The statuses of a run that has not ended; every other run status is terminal (the one definition of
#: "ended": the runtime, the client SDK and the spectator streams all read it from here).
LIVE_RUN_STATUSES = frozenset({"created", "running"})
TERMINAL_RUN_STATUSES = frozenset(RUN_STATUSES) - LIVE_RUN_STATUSES
RECEIPT_STATUSES: tuple[str, ...] = ("accepted", "duplicate", "rejected", "stale", "expired")
OUTCOMES: tuple[str, ...] = ("pending", "accepted", "rejected", "completed", "interrupted", "none")
#: Outcomes a receipt for an accepted command can carry (everything but "none").
ENGINE_OUTCOMES: tuple[str, ...] = ("pending", "accepted", "rejected", "completed", "interrupted")
#: Longest decision deadline a run may ask for: one day.
MAX_DECISION_DEADLINE_S = 86400.0


class FieldValueError(ValueError):
    """A field has a value of the right type but outside its allowed range; names the field.

    Raised by model validators; the converter reports it at the field's JSON path.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_pace(_instance: object, attribute: "attrs.Attribute[Any]", value: object) -> None:
    if value is None:
        return
    if not _is_number(value) or not math.isfinite(value) or value <= 0:  # type: ignore[operator,arg-type]
        raise FieldValueError(
            attribute.name,
            f"expected null (as fast as answers allow) or a number > 0 (sim seconds per clock second), got {value!r}",
        )


def _check_deadline(_instance: object, attribute: "attrs.Attribute[Any]", value: object) -> None:
    if not _is_number(value) or not math.isfinite(value) or not 0 < value <= MAX_DECISION_DEADLINE_S:  # type: ignore[operator,arg-type]
        raise FieldValueError(
            attribute.name,
            f"expected a number of seconds > 0 and <= {MAX_DECISION_DEADLINE_S:g}, got {value!r}",
        )


@attrs.frozen
class RoleSelector:
    """``controlled_agents: {"role": "forager"}``: every agent of that role is driven remotely."""

    WIRE_NAME: ClassVar[str] = "the role selector"

    role: str


#: Who a run's remote clients drive: a list of agent ids, ``"all"``, or ``{"role": ROLE}``. The selectors
#: keep the body small whatever the world's size: 10,000 ids do not fit the 64 KiB body limit (about
#: 4,000 do), a selector always does.
ControlledAgents = list[str] | Literal["all"] | RoleSelector


def _check_unique(_instance: object, attribute: "attrs.Attribute[Any]", value: ControlledAgents) -> None:
    if not isinstance(value, list):
        return
    seen: set[str] = set()
    for item in value:
        if item in seen:
            raise FieldValueError(attribute.name, f"{item!r} is listed twice; name each agent once")
        seen.add(item)


def _check_npc_policy(_instance: object, attribute: "attrs.Attribute[Any]", value: NpcPolicyValue) -> None:
    if isinstance(value, str):
        if value not in ("solution", "none"):
            raise FieldValueError(attribute.name, f"expected one of 'solution', 'none', or a team {{KEY: POLICY}}, got {value!r}")
        return
    if not 1 <= len(value) <= 256:
        raise FieldValueError(attribute.name, "a team names 1 to 256 roles or agents (\"*\" for every other one)")
    for key, policy in value.items():
        if not 1 <= len(key) <= 200:
            raise FieldValueError(attribute.name, f"a team's key is a role, an agent id or \"*\", got {key!r}")
        if not NPC_TEAM_POLICY.match(policy):
            raise FieldValueError(attribute.name, f"{key}: expected solution, none or population:NAME, got {policy!r}")


@attrs.frozen
class FaultsConfig:
    """``"faults": {"spec": "lost_reply=0.2,reset=0.1", "seed": 7}`` of a run creation body (docs/faults.md):
    seeded faults on this run's wire, for testing the agents that drive it. The SPEC is read by the runtime
    (``warren_sim.runtime.faults.parse_faults``), whose teaching error a bad one gets (400)."""

    WIRE_NAME: ClassVar[str] = "the faults object"

    spec: str
    seed: int = 0


@attrs.frozen
class RunCreate:
    """Body of ``POST /v1/runs``: who is driven remotely and how the run is paced.

    ``controlled_agents`` (ids, ``"all"`` or ``{"role": ROLE}``) are claimed by remote clients; ``npc_policy`` drives everyone else ("solution":
    the scenario's bundled policies; "none": they no-op; or a team ``{"courier": "solution", "*": "none"}``). ``pace`` null means as fast as answers allow, a
    number p means sim time may not run ahead of p x elapsed clock time. ``decision_deadline_s`` is the
    per-observation deadline. ``params`` are scenario parameters (validated by the scenario, not here).
    """

    WIRE_NAME: ClassVar[str] = "the run creation body"

    controlled_agents: ControlledAgents = attrs.field(factory=list, validator=_check_unique)
    npc_policy: NpcPolicyValue = attrs.field(default="solution", validator=_check_npc_policy)
    pace: float | None = attrs.field(default=None, validator=_check_pace)
    decision_deadline_s: float = attrs.field(default=60.0, validator=_check_deadline)
    params: dict[str, ParamValue] = attrs.field(factory=dict)
    faults: FaultsConfig | None = None


def _check_cursor(instance: Any, attribute: Any, value: int) -> None:
    if value < 0:
        raise FieldValueError(attribute.name, f"a cursor is a record's index in the journal, >= 0, got {value}")


@attrs.frozen
class RunFork(RunCreate):
    """Body of ``POST /v1/runs/{run}/fork`` (docs/fork.md, "Served"): the run creation body's fields, with the same
    defaults, plus ``cursor``, the parent's journal cursor to fork at (the fork starts from the last batch boundary
    at or before it). The world is the parent's (its scenario, seed and params): ``params`` must stay empty."""

    WIRE_NAME: ClassVar[str] = "the run fork body"

    cursor: int = attrs.field(kw_only=True, validator=_check_cursor)


@attrs.frozen
class ClaimResponse:
    """Answer to a claim: the lease token to send as ``?lease=`` and the briefing revision to fetch."""

    WIRE_NAME: ClassVar[str] = "the claim response"

    lease: str
    briefing_revision: int


@attrs.frozen
class BulkClaim:
    """Body of ``POST /v1/runs/{run}/claim``: several controlled agents claimed in one request (an extension).

    ``agents`` selects among the run's controlled agents as ``controlled_agents`` selects among a world's:
    ids, ``"all"`` or ``{"role": ROLE}``. Why: claiming 10,000 agents one request each costs ~1 ms of
    framework per request (10 s); one request costs one reply (bench/RESULTS.md "### scale").
    """

    WIRE_NAME: ClassVar[str] = "the bulk claim body"

    agents: ControlledAgents = attrs.field(validator=_check_unique)


@attrs.frozen
class BulkClaimResponse:
    """Answer to a bulk claim: one fresh lease token per agent claimed (send each as that agent's ``?lease=``)."""

    WIRE_NAME: ClassVar[str] = "the bulk claim response"

    leases: dict[str, str]
    briefing_revision: int


@attrs.frozen
class MultiPoll:
    """Body of ``POST /v1/runs/{run}/observations?wait=S``: one long-poll for several agents (an extension).

    ``leases`` maps each agent to its own lease token; ``after`` (per agent, default -1) is the highest
    seq already received, as the single poll's ``?after=``; ``parts`` narrows each envelope as the WebSocket
    binding's ``agent.subscribe`` does (leaving out ``text`` and ``affordances`` spares building them). Why: a
    client driving many agents holds one
    request instead of one per agent, and a batch wakes one task per poll (bench/RESULTS.md "### scale").
    """

    WIRE_NAME: ClassVar[str] = "the multi-agent poll body"

    leases: dict[str, str]
    after: dict[str, int] = attrs.field(factory=dict)
    parts: list[str] | None = None


@attrs.frozen
class Conflict:
    """Why an accepted command's action was rejected at adjudication, when it lost a same-batch conflict.

    ``winner`` is the agent whose action, accepted earlier in the same batch's order, took ``resource``
    (an item id) first. Evaluations count conflicts from this, never from ``outcome_reason``'s prose.
    """

    WIRE_NAME: ClassVar[str] = "the conflict"

    winner: str
    resource: str


def _check_conflict(instance: "Receipt", attribute: "attrs.Attribute[Any]", value: Conflict | None) -> None:
    if value is not None and instance.outcome != "rejected":
        raise FieldValueError(attribute.name, f"only a receipt whose outcome is 'rejected' names a conflict; this "
                              f"one's outcome is {instance.outcome!r}, so conflict is null")


def _check_outcome(instance: "Receipt", attribute: "attrs.Attribute[Any]", value: str) -> None:
    if instance.status in ("accepted", "duplicate"):
        if value not in ENGINE_OUTCOMES:
            raise FieldValueError(
                attribute.name,
                f"a {instance.status} receipt's outcome is one of {', '.join(ENGINE_OUTCOMES)}, got {value!r}",
            )
    elif value != "none" or instance.outcome_reason != "":
        raise FieldValueError(
            attribute.name,
            f"a {instance.status} command was never accepted, so its outcome is 'none' with an empty "
            f"outcome_reason, got {value!r} / {instance.outcome_reason!r}",
        )


@attrs.frozen
class Receipt:
    """The server's verdict on one submitted command, and (for accepted ones) the engine's outcome so far.

    ``detail`` teaches why a verdict is not ``accepted``; ``outcome_reason`` explains an engine
    ``rejected``/``interrupted`` outcome. See the module docstring for ``outcome == "none"``. ``conflict`` is
    set on a ``rejected`` outcome that lost a same-batch conflict (see :class:`Conflict`), null otherwise; a
    receipt without the key (from an older server) reads as null.
    """

    WIRE_NAME: ClassVar[str] = "the receipt"

    command_id: str
    observation_id: str
    status: ReceiptStatus = attrs.field(validator=attrs.validators.in_(RECEIPT_STATUSES))
    detail: str
    outcome: Outcome = attrs.field(validator=_check_outcome)
    outcome_reason: str
    conflict: Conflict | None = attrs.field(default=None, validator=_check_conflict)


@attrs.frozen
class Envelope:
    """One observation as delivered to an agent: exactly the seed's fields, in the seed's order.

    ``observation`` is the authoritative structured view; ``text`` renders the same facts for a prompt;
    ``deadline_unix`` is when the decision must have arrived (see :mod:`warren_sim.runtime.clock`).
    """

    WIRE_NAME: ClassVar[str] = "the observation envelope"

    run_id: str
    agent_id: str
    observation_id: str
    seq: int
    sim_time_ms: int
    reason: str
    deadline_unix: float
    briefing_revision: int
    observation: dict[str, Any]
    text: str
    affordances: list[dict[str, Any]]


@attrs.frozen
class Problem:
    """An RFC 9457 problem body (``application/problem+json``); build one with :func:`problem`."""

    WIRE_NAME: ClassVar[str] = "the problem"

    type: str
    title: str
    status: int
    detail: str


#: Status phrases pinned here (Python renamed 413/422 across versions; titles must not drift).
_TITLES: dict[int, str] = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    410: "Gone",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def problem(status: int, detail: str, *, title: str | None = None, type: str | None = None) -> dict[str, Any]:
    """A problem+json body as a plain dict, ready to serialize: ``{type, title, status, detail}``.

    ``type`` defaults to ``"about:blank"`` and ``title`` to the status phrase (see the module docstring).
    ``detail`` must teach: what was wrong and what would be right.
    """
    if title is None:
        try:
            title = _TITLES.get(status) or http.HTTPStatus(status).phrase
        except ValueError:
            title = "Error"
    return attrs.asdict(Problem(type=type or "about:blank", title=title, status=status, detail=detail))


@attrs.frozen
class AgentView:
    """One agent in a run view: who it is and whether it is driven remotely and currently leased."""

    WIRE_NAME: ClassVar[str] = "an agent entry of the run view"

    agent_id: str
    role: str
    controlled: bool
    claimed: bool


@attrs.frozen
class RunView:
    """What ``GET /v1/runs/{run}`` shows: status, clock, agents, objectives, and the result once ended.

    ``error`` says why a ``crashed`` run crashed (null otherwise); ``result`` is null until the run ends.
    """

    WIRE_NAME: ClassVar[str] = "the run view"

    run_id: str
    scenario: str
    seed: int
    status: RunStatus = attrs.field(validator=attrs.validators.in_(RUN_STATUSES))
    sim_time_ms: int
    agents: list[AgentView]
    objectives: list[dict[str, Any]]
    result: dict[str, Any] | None
    error: str | None
    pace: float | None
    decision_deadline_s: float
    # a fork's parent and fork point ({"run_id", "cursor", "batch_cursor"}); absent from a run that is no fork
    forked_from: dict[str, Any] | None = None
    #: the injected faults its agents met, by kind (docs/faults.md); left out while there are none
    faults: dict[str, int] | None = None
