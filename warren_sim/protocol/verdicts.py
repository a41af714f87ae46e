"""The verdict on a submitted command (DESIGN section 3), as a pure function over one agent's ledger.

Why pure: the HTTP route and the WebSocket binding (``agent.submit``, ``agent.submit_many``) must give the
same verdict for the same state, and "verdicts other than accepted change nothing" is easiest to guarantee
when judging cannot change anything. So :func:`judge` only reads an :class:`AgentLedger`; the caller
journals the verdict and, for ``accepted`` only, calls :func:`record_acceptance`. A non-accepted verdict
therefore never occupies its ``command_id``: a retry is judged again against the then-current state.

Verdict order (first match wins):

1. ``command_id`` or ``observation_id`` missing or not a string (or an empty ``command_id``) -> HTTP 422,
   no receipt: such a command cannot be deduplicated.
2. ``command_id`` already accepted for this agent -> ``duplicate``, carrying the original receipt.
3. ``observation_id`` never issued to this agent -> ``rejected`` (unknown observation).
4. observation expired -> ``expired`` (deadline passed vs. run ended); judged before the payload.
5. observation superseded, or answered by another command -> ``stale``.
6. payload invalid (shape here, then the caller's ``validate_payload``) -> ``rejected``.
7. else ``accepted`` with outcome ``pending``.

Decisions: the decision fields are judged by key presence, as the engine does (``"sleep_ms": null`` is a
present, invalid ``sleep_ms``, not an absent one). An empty-string ``command_id`` is refused with 422 like a
non-string one: it could be deduplicated, but every later command would then be its "duplicate".
Non-accepted receipts carry ``outcome: "none"`` (see :mod:`warren_sim.protocol.models`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from warren_sim.engine.command import (
    COMMAND_SHAPES,
    DECISION_FIELDS,
    MAX_SLEEP_MS,
    json_type_name,
    parse_command,
    show_json,
)
from warren_sim.protocol.models import Receipt

__all__ = [
    "COMMAND_FIELDS",
    "MAX_SLEEP_MS",
    "AgentLedger",
    "Judgement",
    "ObservationRecord",
    "judge",
    "normalize_command",
    "record_acceptance",
]

#: Every key a command body may carry: its ids, then the decision's fields (the engine's, ``engine/command.py``,
#: where the shape and ``MAX_SLEEP_MS`` are defined).
COMMAND_FIELDS = ("command_id", "observation_id", *DECISION_FIELDS)

ObservationStatus = Literal["outstanding", "answered", "expired", "superseded"]
ExpiryReason = Literal["deadline", "run_ended"]
_MISSING = object()


@attrs.define
class ObservationRecord:
    """What the server remembers of one observation issued to an agent.

    ``expired_reason`` is ``"deadline"`` or ``"run_ended"`` once expired; ``answered_by`` is the accepted
    command id once answered; ``superseded_by`` the newer observation that replaced it, if any.
    """

    observation_id: str
    seq: int
    status: ObservationStatus = "outstanding"
    expired_reason: str = ""
    answered_by: str | None = None
    superseded_by: str | None = None


@attrs.define
class AgentLedger:
    """One agent's observations and accepted commands: everything :func:`judge` needs, nothing else.

    Invariant: at most one observation is outstanding (``outstanding_id``). The mutating methods are for the
    runtime, which owns the ledger; ``judge`` never calls them.
    """

    observations: dict[str, ObservationRecord] = attrs.Factory(dict)
    #: command_id -> the receipt it got when accepted (outcome ``pending``: the engine holds the outcome, and
    #: the runtime fills it into every receipt it sends, ``runtime.views.receipt_with_outcome``).
    accepted: dict[str, Receipt] = attrs.Factory(dict)
    #: command_id -> its normalized payload, to tell a faithful retry from a different body.
    accepted_payloads: dict[str, dict[str, Any]] = attrs.Factory(dict)
    newest_id: str | None = None
    outstanding_id: str | None = None

    def issue(self, observation_id: str, seq: int) -> ObservationRecord:
        """Record a newly issued observation; the previous outstanding one (if any) becomes superseded."""
        if observation_id in self.observations:
            raise ValueError(f"observation {observation_id!r} was already issued")
        if self.newest_id is not None and seq <= self.observations[self.newest_id].seq:
            raise ValueError(
                f"observation seq must grow: {seq} after {self.observations[self.newest_id].seq}"
            )
        if self.outstanding_id is not None:
            self.supersede(self.outstanding_id, by=observation_id)
        record = ObservationRecord(observation_id=observation_id, seq=seq)
        self.observations[observation_id] = record
        self.newest_id = observation_id
        self.outstanding_id = observation_id
        return record

    def _close(self, observation_id: str) -> ObservationRecord | None:
        record = self.observations[observation_id]  # KeyError for an id never issued: a runtime bug
        if record.status != "outstanding":
            return None
        if self.outstanding_id == observation_id:
            self.outstanding_id = None
        return record

    def expire(self, observation_id: str, reason: ExpiryReason) -> bool:
        """Close an outstanding observation as expired; False (no change) if it was already closed."""
        if reason not in ("deadline", "run_ended"):
            raise ValueError(f"expiry reason must be 'deadline' or 'run_ended', got {reason!r}")
        record = self._close(observation_id)
        if record is None:
            return False
        record.status = "expired"
        record.expired_reason = reason
        return True

    def supersede(self, observation_id: str, by: str | None = None) -> bool:
        """Close an outstanding observation as superseded (by a newer one); False if already closed."""
        record = self._close(observation_id)
        if record is None:
            return False
        record.status = "superseded"
        record.superseded_by = by
        return True

    def mark_run_ended(self) -> list[str]:
        """Expire every outstanding observation with reason ``run_ended``; return their ids."""
        ended = [oid for oid, rec in self.observations.items() if rec.status == "outstanding"]
        for oid in ended:
            self.expire(oid, "run_ended")
        return ended

    def outstanding(self) -> ObservationRecord | None:
        """The observation awaiting an answer, if any (the one to redeliver on reconnect)."""
        return None if self.outstanding_id is None else self.observations[self.outstanding_id]


@attrs.frozen
class Judgement:
    """The verdict on one command body.

    ``http_status`` is 200 with a ``receipt``, or 422 with ``problem_detail`` and no receipt. ``accept`` is
    True only for ``accepted``; then ``payload`` is the normalized command to hand the engine:
    ``{"action": str, "args": dict}``, ``{"sleep_ms": int}`` or ``{"noop": True}``.
    """

    http_status: int
    receipt: Receipt | None = None
    problem_detail: str = ""
    accept: bool = False
    payload: dict[str, Any] | None = None


def _refuse(detail: str) -> Judgement:
    return Judgement(http_status=422, problem_detail=detail)


def _receipt(
    command_id: str, observation_id: str, status: Literal["rejected", "stale", "expired"], detail: str
) -> Judgement:
    receipt = Receipt(command_id, observation_id, status, detail, "none", "")
    return Judgement(http_status=200, receipt=receipt)


def normalize_command(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """Check a served command's shape and return ``(payload, None)`` or ``(None, teaching_error)``: the
    engine's one parser (``engine/command.py: parse_command``) with the ids of :data:`COMMAND_FIELDS` allowed.
    Whether the action is a tool of the catalog with valid args is the caller's ``validate_payload``."""
    return parse_command(body, COMMAND_FIELDS)


def judge(
    ledger: AgentLedger,
    body: object,
    validate_payload: Callable[[str, dict[str, Any]], str | None],
) -> Judgement:
    """Judge one command body against one agent's ledger; never mutates the ledger.

    ``validate_payload(observation_id, payload)`` is the engine's check of a well-shaped payload against
    the tool catalog, the tool's input schema and the observation's affordances; it returns a teaching
    error or None, and is only called when steps 1-5 found nothing. For ``duplicate`` the returned receipt
    carries the receipt stored in ``ledger.accepted`` (the caller fills in the engine's current outcome).
    """
    if not isinstance(body, dict):
        return _refuse(
            f"the command must be a JSON object, got {json_type_name(body)}; send "
            '{"command_id": "<your id>", "observation_id": "<agent>#<seq>", ...} with one of '
            + COMMAND_SHAPES
        )
    # 1. identifiers: without them the command cannot be deduplicated
    command_id = body.get("command_id", _MISSING)
    observation_id = body.get("observation_id", _MISSING)
    faults = []
    for name, value in (("command_id", command_id), ("observation_id", observation_id)):
        if value is _MISSING:
            faults.append(f"{name} is missing")
        elif not isinstance(value, str):
            faults.append(f"{name} must be a string, got {show_json(value)}")
    if command_id == "":
        faults.append("command_id must not be empty")
    if faults:
        return _refuse(
            "; ".join(faults) + ". Every command needs a client-minted string command_id (new for each "
            "command, reused only to retry that same command) and the string observation_id it answers "
            '(for example "engineer-1#0")'
        )
    assert isinstance(command_id, str) and isinstance(observation_id, str)

    # 2. duplicate of an accepted command: the original stands
    original = ledger.accepted.get(command_id)
    if original is not None:
        same = observation_id == original.observation_id
        if same and command_id in ledger.accepted_payloads:
            payload, _ = normalize_command(body)
            same = payload == ledger.accepted_payloads[command_id]
        detail = (
            original.detail
            if same
            else (
                f"this command_id was already accepted for observation {original.observation_id!r}; the original "
                "command stands and this body was ignored (it differs from the original); mint a new command_id "
                "for a new command"
            )
        )
        receipt = Receipt(
            command_id=original.command_id,
            observation_id=original.observation_id,
            status="duplicate",
            detail=detail,
            outcome=original.outcome,
            outcome_reason=original.outcome_reason,
        )
        return Judgement(http_status=200, receipt=receipt)

    # 3. never issued
    record = ledger.observations.get(observation_id)
    if record is None:
        if ledger.newest_id is None:
            hint = "no observation has been issued to you yet; poll GET .../observations for your first one"
        else:
            newest = ledger.observations[ledger.newest_id]
            hint = f"the newest observation issued to you is {newest.observation_id!r} ({newest.status})"
        return _receipt(
            command_id, observation_id, "rejected", f"unknown observation {observation_id!r}: {hint}"
        )

    # 4. expired, judged before the payload
    if record.status == "expired":
        if record.expired_reason == "run_ended":
            detail = (
                f"observation {observation_id!r} expired because the run ended; the run accepts no more "
                "commands (GET the run for its final status)"
            )
        else:
            detail = (
                f"observation {observation_id!r} expired: its decision deadline passed before this command "
                "arrived, so a noop was recorded for that wake; answer your next observation before its "
                "deadline_unix"
            )
        return _receipt(command_id, observation_id, "expired", detail)

    # 5. stale: replaced by a newer observation, or already answered by another command
    if record.status == "superseded":
        if record.superseded_by:
            why = (f"observation {observation_id!r} was superseded by {record.superseded_by!r}: a newer "
                   "observation replaced it while it went unanswered")
        else:
            why = (f"observation {observation_id!r} was superseded: no client held the agent's lease when its "
                   "batch was decided, so a noop was recorded and the agent's next observation replaces it")
        return _receipt(command_id, observation_id, "stale", why + "; answer your newest observation instead")
    if record.status == "answered":
        return _receipt(
            command_id,
            observation_id,
            "stale",
            f"observation {observation_id!r} was already answered by command {record.answered_by!r}; exactly "
            "one command is accepted per observation, so wait for your next observation",
        )

    # 6. payload: shape, then the engine's catalog/schema/affordance check
    payload, error = normalize_command(body)
    if payload is not None:
        error = validate_payload(observation_id, payload)
    if error is not None or payload is None:
        return _receipt(command_id, observation_id, "rejected", error or "invalid command")

    # 7. accepted
    receipt = Receipt(command_id, observation_id, "accepted", "", "pending", "")
    return Judgement(http_status=200, receipt=receipt, accept=True, payload=payload)


def record_acceptance(ledger: AgentLedger, receipt: Receipt, payload: dict[str, Any] | None = None) -> None:
    """Apply an ``accepted`` verdict: answer its observation and make its command_id a duplicate from now on.

    Pass the judgement's ``payload`` so a later resubmission with a different body is told so; without it
    only the observation_id is compared.
    """
    if receipt.status != "accepted":
        raise ValueError(f"only accepted receipts are recorded, got {receipt.status!r}")
    if receipt.command_id in ledger.accepted:
        raise ValueError(f"command {receipt.command_id!r} was already accepted")
    record = ledger.observations[receipt.observation_id]
    if record.status != "outstanding":
        raise ValueError(f"observation {receipt.observation_id!r} is {record.status}, not outstanding")
    record.status = "answered"
    record.answered_by = receipt.command_id
    if ledger.outstanding_id == receipt.observation_id:
        ledger.outstanding_id = None
    ledger.accepted[receipt.command_id] = receipt
    if payload is not None:
        ledger.accepted_payloads[receipt.command_id] = payload
