"""The verdict logic of DESIGN section 3: every verdict, their order, re-judging, and purity."""

import copy
from typing import Any

import attrs
import pytest

from warren_sim.protocol.models import Receipt
from warren_sim.protocol.verdicts import (
    MAX_SLEEP_MS,
    AgentLedger,
    Judgement,
    judge,
    normalize_command,
    record_acceptance,
)

CALLS: list[tuple[str, dict[str, Any]]] = []


def engine_check(observation_id: str, payload: dict[str, Any]) -> str | None:
    """Stands in for the engine's catalog/schema/affordance check: one tool, one valid item."""
    CALLS.append((observation_id, payload))
    if "action" in payload:
        if payload["action"] != "take":
            return f"unknown action {payload['action']!r}; your tools are: take"
        if payload["args"] != {"item": "toolbox-1"}:
            return "args.item: choose one of ['toolbox-1']"
    return None


def must_not_validate(observation_id: str, payload: dict[str, Any]) -> str | None:
    raise AssertionError("the payload must not be validated for this verdict")


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


def cmd(command_id: Any = "c-1", observation_id: Any = "e#0", **decision: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"command_id": command_id, "observation_id": observation_id}
    body.update(decision or {"action": "take", "args": {"item": "toolbox-1"}})
    return body


def pure_judge(ledger: AgentLedger, body: object, validate: Any = engine_check) -> Judgement:
    """judge(), asserting it changed neither the ledger nor the body."""
    before = copy.deepcopy(attrs.asdict(ledger))
    body_before = copy.deepcopy(body)
    judgement = judge(ledger, body, validate)
    assert attrs.asdict(ledger) == before
    assert body == body_before
    return judgement


def accept(ledger: AgentLedger, body: dict[str, Any]) -> Receipt:
    judgement = pure_judge(ledger, body)
    assert judgement.accept and judgement.receipt is not None
    record_acceptance(ledger, judgement.receipt, judgement.payload)
    return judgement.receipt


@pytest.fixture
def ledger() -> AgentLedger:
    ledger = AgentLedger()
    ledger.issue("e#0", 0)
    return ledger


def status_of(judgement: Judgement) -> str:
    assert judgement.http_status == 200 and judgement.receipt is not None
    return judgement.receipt.status


# ------------------------------------------------------------------------------------------- 7. accepted


def test_accepted(ledger: AgentLedger) -> None:
    judgement = pure_judge(ledger, cmd())
    assert judgement == Judgement(
        http_status=200,
        receipt=Receipt("c-1", "e#0", "accepted", "", "pending", ""),
        accept=True,
        payload={"action": "take", "args": {"item": "toolbox-1"}},
    )
    assert CALLS == [("e#0", {"action": "take", "args": {"item": "toolbox-1"}})]
    assert judgement.receipt is not None
    record_acceptance(ledger, judgement.receipt, judgement.payload)
    record = ledger.observations["e#0"]
    assert (record.status, record.answered_by) == ("answered", "c-1")
    assert ledger.accepted["c-1"] == judgement.receipt
    assert ledger.outstanding() is None


@pytest.mark.parametrize(
    "decision, payload",
    [
        ({"sleep_ms": 0}, {"sleep_ms": 0}),
        ({"sleep_ms": MAX_SLEEP_MS}, {"sleep_ms": MAX_SLEEP_MS}),
        ({"noop": True}, {"noop": True}),
        (
            {"action": "take", "args": {"item": "toolbox-1"}},
            {"action": "take", "args": {"item": "toolbox-1"}},
        ),
    ],
)
def test_accepted_payloads_are_normalized(
    ledger: AgentLedger, decision: dict[str, Any], payload: dict[str, Any]
) -> None:
    judgement = pure_judge(ledger, cmd(**decision))
    assert judgement.accept and judgement.payload == payload


def test_action_without_args_gets_empty_args() -> None:
    assert normalize_command({"action": "inspect"}) == ({"action": "inspect", "args": {}}, None)


# ------------------------------------------------------------------------------------------- 1. HTTP 422


@pytest.mark.parametrize(
    "body, words",
    [
        (cmd(command_id=7), "command_id must be a string, got a number 7"),
        (cmd(command_id=None), "command_id must be a string, got null"),
        (cmd(command_id=["c"]), "command_id must be a string, got an array"),
        (cmd(command_id=""), "command_id must not be empty"),
        (cmd(observation_id=0), "observation_id must be a string, got a number 0"),
        (cmd(observation_id={"id": "e#0"}), "observation_id must be a string, got an object"),
        ({"observation_id": "e#0", "noop": True}, "command_id is missing"),
        ({"command_id": "c-1", "noop": True}, "observation_id is missing"),
    ],
)
def test_unusable_ids_get_422(ledger: AgentLedger, body: dict[str, Any], words: str) -> None:
    judgement = pure_judge(ledger, body, must_not_validate)
    assert judgement.http_status == 422
    assert judgement.receipt is None and not judgement.accept and judgement.payload is None
    assert words in judgement.problem_detail
    assert "client-minted string command_id" in judgement.problem_detail


def test_both_ids_bad_are_both_named(ledger: AgentLedger) -> None:
    detail = pure_judge(ledger, {"command_id": 1, "observation_id": 2}, must_not_validate).problem_detail
    assert "command_id must be a string" in detail and "observation_id must be a string" in detail


@pytest.mark.parametrize("body", [[], "noop", None, 3])
def test_body_not_an_object_gets_422(ledger: AgentLedger, body: object) -> None:
    judgement = pure_judge(ledger, body, must_not_validate)
    assert judgement.http_status == 422 and "must be a JSON object" in judgement.problem_detail


def test_422_beats_duplicate(ledger: AgentLedger) -> None:
    accept(ledger, cmd())
    assert pure_judge(ledger, cmd(observation_id=5), must_not_validate).http_status == 422


# ------------------------------------------------------------------------------------------- 2. duplicate


def test_duplicate_of_identical_body_replays_the_original(ledger: AgentLedger) -> None:
    original = accept(ledger, cmd())
    judgement = pure_judge(ledger, cmd(), must_not_validate)
    assert judgement.receipt == attrs.evolve(original, status="duplicate")
    assert not judgement.accept and judgement.payload is None


@pytest.mark.parametrize(
    "body",
    [
        cmd(action="take", args={"item": "other"}),
        cmd(sleep_ms=5),
        cmd(sleep_ms="oops"),  # a malformed payload: duplicate still wins
        cmd(observation_id="e#1"),  # names a newer observation
        cmd(observation_id="e#999"),  # names an unknown observation
    ],
)
def test_duplicate_with_a_different_body_says_it_was_ignored(
    ledger: AgentLedger, body: dict[str, Any]
) -> None:
    accept(ledger, cmd())
    ledger.issue("e#1", 1)
    judgement = pure_judge(ledger, body, must_not_validate)
    receipt = judgement.receipt
    assert receipt is not None and receipt.status == "duplicate"
    assert (receipt.command_id, receipt.observation_id, receipt.outcome) == ("c-1", "e#0", "pending")
    assert receipt.detail.startswith(
        "this command_id was already accepted for observation 'e#0'; the original command stands and this "
        "body was ignored"
    )


def test_duplicate_beats_expired_and_stale(ledger: AgentLedger) -> None:
    accept(ledger, cmd())
    ledger.issue("e#1", 1)
    ledger.expire("e#1", "deadline")
    assert status_of(pure_judge(ledger, cmd(observation_id="e#1"), must_not_validate)) == "duplicate"
    ledger.mark_run_ended()
    assert status_of(pure_judge(ledger, cmd(), must_not_validate)) == "duplicate"


def test_duplicate_is_per_agent() -> None:
    first, second = AgentLedger(), AgentLedger()
    first.issue("a#0", 0)
    second.issue("b#0", 0)
    accept(first, cmd(observation_id="a#0"))
    assert status_of(pure_judge(second, cmd(observation_id="b#0"))) == "accepted"


# ------------------------------------------------------------------------------------------- 3. unknown


def test_unknown_observation_names_the_newest(ledger: AgentLedger) -> None:
    ledger.issue("e#1", 1)
    judgement = pure_judge(ledger, cmd(observation_id="e#7"), must_not_validate)
    receipt = judgement.receipt
    assert receipt is not None and receipt.status == "rejected"
    assert (receipt.outcome, receipt.outcome_reason) == ("none", "")
    assert (
        receipt.detail
        == "unknown observation 'e#7': the newest observation issued to you is 'e#1' (outstanding)"
    )


def test_unknown_observation_before_any_was_issued() -> None:
    receipt = pure_judge(AgentLedger(), cmd(), must_not_validate).receipt
    assert receipt is not None and receipt.status == "rejected"
    assert "no observation has been issued to you yet" in receipt.detail


def test_unknown_observation_beats_a_malformed_payload(ledger: AgentLedger) -> None:
    receipt = pure_judge(ledger, cmd(observation_id="x", sleep_ms=-1), must_not_validate).receipt
    assert receipt is not None and receipt.detail.startswith("unknown observation 'x'")


# ------------------------------------------------------------------------------------------- 4. expired


def test_expired_by_deadline(ledger: AgentLedger) -> None:
    assert ledger.expire("e#0", "deadline") is True
    receipt = pure_judge(ledger, cmd(), must_not_validate).receipt
    assert receipt is not None and receipt.status == "expired" and receipt.outcome == "none"
    assert "decision deadline passed" in receipt.detail and "noop was recorded" in receipt.detail


def test_expired_by_run_end(ledger: AgentLedger) -> None:
    assert ledger.mark_run_ended() == ["e#0"]
    receipt = pure_judge(ledger, cmd(), must_not_validate).receipt
    assert receipt is not None and receipt.status == "expired"
    assert "because the run ended" in receipt.detail


@pytest.mark.parametrize(
    "decision",
    [{"sleep_ms": "100"}, {"action": 3}, {"noop": False}, {}, {"bogus": 1}, {"noop": True, "sleep_ms": 1}],
)
def test_expired_is_judged_before_the_payload(ledger: AgentLedger, decision: dict[str, Any]) -> None:
    ledger.expire("e#0", "deadline")
    body = {"command_id": "c-1", "observation_id": "e#0", **decision}
    assert status_of(pure_judge(ledger, body, must_not_validate)) == "expired"


# ------------------------------------------------------------------------------------------- 5. stale


def test_stale_when_superseded(ledger: AgentLedger) -> None:
    ledger.issue("e#1", 1)
    assert ledger.observations["e#0"].status == "superseded"
    receipt = pure_judge(ledger, cmd(sleep_ms="bad"), must_not_validate).receipt
    assert receipt is not None and receipt.status == "stale" and receipt.outcome == "none"
    assert "superseded by 'e#1'" in receipt.detail


def test_stale_when_answered_by_another_command(ledger: AgentLedger) -> None:
    accept(ledger, cmd(command_id="c-1"))
    receipt = pure_judge(ledger, cmd(command_id="c-2", noop=True), must_not_validate).receipt
    assert receipt is not None and receipt.status == "stale"
    assert receipt.command_id == "c-2" and receipt.observation_id == "e#0"
    assert "already answered by command 'c-1'" in receipt.detail


def test_expired_beats_stale_for_a_superseded_then_ended_run(ledger: AgentLedger) -> None:
    ledger.issue("e#1", 1)
    ledger.mark_run_ended()
    assert status_of(pure_judge(ledger, cmd(observation_id="e#1"), must_not_validate)) == "expired"
    assert status_of(pure_judge(ledger, cmd(observation_id="e#0"), must_not_validate)) == "stale"


# ------------------------------------------------------------------------------------------- 6. rejected


@pytest.mark.parametrize(
    "decision, words",
    [
        ({}, "the command has no decision"),
        ({"action": "take", "sleep_ms": 5}, "the command has action and sleep_ms"),
        ({"noop": True, "sleep_ms": 5}, "the command has sleep_ms and noop"),
        ({"noop": False}, "noop must be true, got false"),
        ({"noop": "true"}, "noop must be true, got a string 'true'"),
        ({"noop": True, "args": {}}, "args belongs with action"),
        ({"sleep_ms": 5, "args": {}}, "args belongs with action"),
        ({"action": 3, "args": {}}, "action must be a string naming one of your tools, got a number 3"),
        ({"action": None}, "action must be a string"),
        ({"action": "take", "args": ["toolbox-1"]}, "args must be an object"),
        ({"action": "take", "args": None}, "args must be an object"),
        (
            {"sleep_ms": "100"},
            "sleep_ms must be an integer number of milliseconds from 0 to 9007199254740991",
        ),
        ({"sleep_ms": None}, "got null"),
        ({"sleep_ms": -1}, "got a number -1"),
        ({"sleep_ms": 1.5}, "got a number 1.5"),
        ({"sleep_ms": 100.0}, "got a number 100.0"),
        ({"sleep_ms": True}, "got true"),
        ({"sleep_ms": MAX_SLEEP_MS + 1}, "sleep_ms must be an integer"),
        (
            {"noop": True, "comment": "x"},
            "unknown field 'comment' in the command; valid fields: action, args, "
            "command_id, noop, observation_id, sleep_ms",
        ),
    ],
)
def test_malformed_payloads_are_rejected_with_teaching_detail(
    ledger: AgentLedger, decision: dict[str, Any], words: str
) -> None:
    body = {"command_id": "c-1", "observation_id": "e#0", **decision}
    receipt = pure_judge(ledger, body, must_not_validate).receipt
    assert receipt is not None and receipt.status == "rejected"
    assert (receipt.outcome, receipt.outcome_reason) == ("none", "")
    assert words in receipt.detail


def test_engine_check_rejections_pass_through(ledger: AgentLedger) -> None:
    receipt = pure_judge(ledger, cmd(action="fly", args={})).receipt
    assert receipt is not None and receipt.status == "rejected"
    assert receipt.detail == "unknown action 'fly'; your tools are: take"
    assert CALLS == [("e#0", {"action": "fly", "args": {}})]


# ------------------------------------------------------------------------------------------- re-judging


def test_non_accepted_verdicts_do_not_occupy_the_command_id(ledger: AgentLedger) -> None:
    wrong = cmd(action="take", args={"item": "hammer"})
    first = pure_judge(ledger, wrong)
    again = pure_judge(ledger, wrong)
    assert status_of(first) == status_of(again) == "rejected"
    assert first == again  # an unchanged retry gets the same verdict
    assert "c-1" not in ledger.accepted
    corrected = pure_judge(ledger, cmd())
    assert status_of(corrected) == "accepted"


def test_stale_id_can_be_reused_for_the_current_observation(ledger: AgentLedger) -> None:
    ledger.issue("e#1", 1)
    assert status_of(pure_judge(ledger, cmd(observation_id="e#0"))) == "stale"
    assert status_of(pure_judge(ledger, cmd(observation_id="e#1"))) == "accepted"


def test_expired_then_retry_on_the_next_observation(ledger: AgentLedger) -> None:
    ledger.expire("e#0", "deadline")
    assert status_of(pure_judge(ledger, cmd())) == "expired"
    ledger.issue("e#1", 1)
    assert ledger.observations["e#0"].status == "expired"  # an expired one is not re-marked superseded
    receipt = accept(ledger, cmd(observation_id="e#1"))
    assert receipt.status == "accepted"


# ------------------------------------------------------------------------------------------- the ledger


def test_issue_supersedes_the_outstanding_one_only() -> None:
    ledger = AgentLedger()
    ledger.issue("e#0", 0)
    assert ledger.outstanding() is not None and ledger.outstanding_id == "e#0"
    ledger.issue("e#1", 1)
    assert ledger.observations["e#0"].superseded_by == "e#1"
    assert ledger.outstanding_id == "e#1" and ledger.newest_id == "e#1"
    with pytest.raises(ValueError, match="already issued"):
        ledger.issue("e#1", 2)
    with pytest.raises(ValueError, match="seq must grow"):
        ledger.issue("e#2", 1)


def test_closing_is_idempotent_and_unknown_ids_are_bugs(ledger: AgentLedger) -> None:
    assert ledger.supersede("e#0") is True
    assert ledger.expire("e#0", "deadline") is False
    assert ledger.observations["e#0"].status == "superseded"
    assert ledger.mark_run_ended() == []
    with pytest.raises(KeyError):
        ledger.expire("nope", "deadline")
    with pytest.raises(ValueError, match="expiry reason"):
        ledger.expire("e#0", "later")  # type: ignore[arg-type]


def test_record_acceptance_refuses_what_was_not_accepted(ledger: AgentLedger) -> None:
    with pytest.raises(ValueError, match="only accepted"):
        record_acceptance(ledger, Receipt("c-1", "e#0", "rejected", "no", "none", ""))
    receipt = accept(ledger, cmd())
    with pytest.raises(ValueError, match="already accepted"):
        record_acceptance(ledger, receipt)
    with pytest.raises(ValueError, match="not outstanding"):
        record_acceptance(ledger, Receipt("c-2", "e#0", "accepted", "", "pending", ""))


def test_acceptance_without_stored_payload_compares_observation_only(ledger: AgentLedger) -> None:
    judgement = pure_judge(ledger, cmd())
    assert judgement.receipt is not None
    record_acceptance(ledger, judgement.receipt)
    receipt = pure_judge(ledger, cmd(sleep_ms=1), must_not_validate).receipt
    assert receipt is not None and receipt.status == "duplicate" and receipt.detail == ""
