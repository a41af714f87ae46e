"""Wire models and the converter: strict types, teaching errors, plain dicts in field order."""

from typing import Any

import attrs
import pytest

from warren_sim.protocol.converter import (
    WireError,
    converter,
    describe_type,
    make_converter,
    structure_or_error,
)
from warren_sim.protocol.models import (
    AgentView,
    ClaimResponse,
    Conflict,
    Envelope,
    Problem,
    Receipt,
    RunCreate,
    RunView,
    problem,
)


def wire_error(data: object, cls: type) -> WireError:
    with pytest.raises(WireError) as info:
        structure_or_error(data, cls)
    assert isinstance(info.value, ValueError)
    return info.value


# ------------------------------------------------------------------------------------------- RunCreate


def test_run_create_defaults() -> None:
    run = structure_or_error({}, RunCreate)
    assert run == RunCreate(
        controlled_agents=[], npc_policy="solution", pace=None, decision_deadline_s=60.0, params={}
    )


def test_run_create_seed_example() -> None:
    run = structure_or_error(
        {"controlled_agents": ["engineer-1"], "npc_policy": "solution", "pace": None}, RunCreate
    )
    assert run.controlled_agents == ["engineer-1"] and run.pace is None


def test_run_create_accepts_ints_for_floats_and_scalar_params() -> None:
    run = structure_or_error(
        {
            "pace": 2,
            "decision_deadline_s": 30,
            "npc_policy": "none",
            "params": {"n": 3, "x": 1.5, "s": "a", "b": True},
        },
        RunCreate,
    )
    assert run.pace == 2.0 and isinstance(run.pace, float)
    assert run.decision_deadline_s == 30.0 and isinstance(run.decision_deadline_s, float)
    assert run.params == {"n": 3, "x": 1.5, "s": "a", "b": True}
    assert run.params["b"] is True and type(run.params["n"]) is int


def test_unknown_field_names_the_valid_fields() -> None:
    err = wire_error({"pase": 1}, RunCreate)
    assert str(err) == (
        "unknown field 'pase' in the run creation body; valid fields: "
        "controlled_agents, decision_deadline_s, faults, npc_policy, pace, params"
    )
    assert err.problems == [("$", str(err))]


@pytest.mark.parametrize(
    "body, path, expected",
    [
        ({"pace": True}, "$.pace", "number"),
        ({"pace": "2"}, "$.pace", "number"),
        ({"pace": 0}, "$.pace", "> 0"),
        ({"pace": -1.5}, "$.pace", "> 0"),
        ({"decision_deadline_s": True}, "$.decision_deadline_s", "number"),
        ({"decision_deadline_s": 0}, "$.decision_deadline_s", "> 0"),
        ({"decision_deadline_s": 86401}, "$.decision_deadline_s", "<= 86400"),
        ({"npc_policy": "solver"}, "$.npc_policy", "one of 'solution', 'none'"),
        ({"npc_policy": None}, "$.npc_policy", "one of 'solution', 'none'"),
        ({"controlled_agents": "engineer-1"}, "$.controlled_agents", 'an array of agent ids, "all", or {"role": ROLE}'),
        ({"controlled_agents": {"role": 3}}, "$.controlled_agents.role", "a string"),
        ({"controlled_agents": ["a", 1]}, "$.controlled_agents[1]", "a string"),
        ({"controlled_agents": ["a", "a"]}, "$.controlled_agents", "listed twice"),
        ({"params": []}, "$.params", "an object"),
        ({"params": {"n": None}}, "$.params.n", "a string, number or boolean"),
        ({"params": {"n": [1]}}, "$.params.n", "a string, number or boolean"),
        ({"params": {"odd key": {}}}, '$.params["odd key"]', "a string, number or boolean"),
    ],
)
def test_run_create_field_errors_teach(body: dict[str, Any], path: str, expected: str) -> None:
    err = wire_error(body, RunCreate)
    assert [p for p, _ in err.problems] == [path]
    assert str(err).startswith(f"{path}: ")
    assert expected in str(err)


def test_bool_is_not_a_number_and_number_is_not_a_bool() -> None:
    assert "got a boolean (true)" in str(wire_error({"pace": True}, RunCreate))
    err = wire_error({"agent_id": "a", "role": "r", "controlled": 1, "claimed": False}, AgentView)
    assert "$.controlled: expected a boolean" in str(err)


def test_several_problems_are_numbered_in_one_message() -> None:
    err = wire_error({"controlled_agents": ["a", 1], "pace": True, "pase": 2}, RunCreate)
    assert str(err).startswith("3 problems in the run creation body: (1) ")
    paths = [p for p, _ in err.problems]
    assert paths == ["$.controlled_agents[1]", "$.pace", "$"]
    assert "unknown field 'pase'" in str(err)


def test_body_that_is_not_an_object() -> None:
    for data in ([], "x", None, 3):
        err = wire_error(data, RunCreate)
        assert "the run creation body must be a JSON object" in str(err)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ValueError, match="pace"):
        RunCreate(pace=-1)


# ------------------------------------------------------------------------------------------- Receipt


def test_receipt_round_trip_and_order() -> None:
    receipt = Receipt("c-7d21", "engineer-1#0", "accepted", "", "pending", "")
    data = converter.unstructure(receipt)
    assert data == {
        "command_id": "c-7d21",
        "observation_id": "engineer-1#0",
        "status": "accepted",
        "detail": "",
        "outcome": "pending",
        "outcome_reason": "",
        "conflict": None,
    }
    assert list(data) == ["command_id", "observation_id", "status", "detail", "outcome", "outcome_reason",
                          "conflict"]
    assert structure_or_error(data, Receipt) == receipt
    del data["conflict"]  # a receipt from a server that predates the field reads as "no conflict"
    assert structure_or_error(data, Receipt) == receipt


def test_a_conflict_is_structured_and_only_on_rejected_outcomes() -> None:
    """conflict names the winner and the resource; only a rejected outcome may carry one; bad shapes teach."""
    data = {"command_id": "c", "observation_id": "courier-1#2", "status": "accepted", "detail": "",
            "outcome": "rejected", "outcome_reason": "toolbox-1 is no longer here: engineer-1 has it earlier in "
            "this batch", "conflict": {"winner": "engineer-1", "resource": "toolbox-1"}}
    receipt = structure_or_error(data, Receipt)
    assert receipt.conflict == Conflict("engineer-1", "toolbox-1")
    assert converter.unstructure(receipt) == data
    with pytest.raises(ValueError, match="only a receipt whose outcome is 'rejected' names a conflict"):
        Receipt("c", "o", "accepted", "", "completed", "", Conflict("engineer-1", "toolbox-1"))
    err = wire_error({**data, "conflict": {"with": "engineer-1"}}, Receipt)
    assert any(path.startswith("$.conflict") for path, _ in err.problems), err.problems


def test_non_accepted_receipts_have_outcome_none() -> None:
    Receipt("c", "o", "rejected", "why", "none", "")
    with pytest.raises(ValueError, match="never accepted"):
        Receipt("c", "o", "stale", "why", "pending", "")
    with pytest.raises(ValueError, match="one of pending"):
        Receipt("c", "o", "accepted", "", "none", "")
    with pytest.raises(ValueError, match="one of pending"):
        Receipt("c", "o", "duplicate", "", "", "")
    err = wire_error(
        {
            "command_id": "c",
            "observation_id": "o",
            "status": "expired",
            "detail": "",
            "outcome": "pending",
            "outcome_reason": "",
        },
        Receipt,
    )
    assert err.problems[0][0] == "$.outcome"


def test_missing_fields_say_what_is_expected() -> None:
    err = wire_error({"command_id": "c"}, Receipt)
    assert "$.observation_id: required field missing (expected a string)" in str(err)
    assert "$.status: required field missing (expected one of 'accepted'" in str(err)


def test_receipt_statuses_are_literal() -> None:
    err = wire_error(
        {
            "command_id": "c",
            "observation_id": "o",
            "status": "ok",
            "detail": "",
            "outcome": "none",
            "outcome_reason": "",
        },
        Receipt,
    )
    assert "$.status: expected one of 'accepted', 'duplicate', 'rejected', 'stale', 'expired'" in str(err)


# ------------------------------------------------------------------------------------------- Envelope


ENVELOPE = {
    "run_id": "run-1",
    "agent_id": "engineer-1",
    "observation_id": "engineer-1#0",
    "seq": 0,
    "sim_time_ms": 0,
    "reason": "start",
    "deadline_unix": 1769812345.1,
    "briefing_revision": 1,
    "observation": {"agent": "engineer-1", "time": 0, "busy": [], "you": {}, "place": {}, "tools": []},
    "text": "[t=0s] You are Sam the engineer",
    "affordances": [{"action": "take", "params": {"item": {"choices": ["toolbox-1"]}}}],
}


def test_envelope_has_exactly_the_seed_fields_in_order() -> None:
    assert [f.name for f in attrs.fields(Envelope)] == list(ENVELOPE)
    envelope = structure_or_error(ENVELOPE, Envelope)
    data = converter.unstructure(envelope)
    assert data == ENVELOPE and list(data) == list(ENVELOPE)
    assert type(data) is dict


def test_envelope_accepts_integer_deadline_and_refuses_extras() -> None:
    envelope = structure_or_error({**ENVELOPE, "deadline_unix": 1769812345}, Envelope)
    assert isinstance(envelope.deadline_unix, float)
    err = wire_error({**ENVELOPE, "extra": 1}, Envelope)
    assert "unknown field 'extra' in the observation envelope" in str(err)
    err = wire_error({**ENVELOPE, "affordances": [1]}, Envelope)
    assert "$.affordances[0]: expected an object" in str(err)


# ------------------------------------------------------------------------------------------- others


def test_claim_response() -> None:
    claim = structure_or_error({"lease": "l-3f9c", "briefing_revision": 1}, ClaimResponse)
    assert converter.unstructure(claim) == {"lease": "l-3f9c", "briefing_revision": 1}
    assert "$.briefing_revision: expected an integer" in str(
        wire_error({"lease": "l", "briefing_revision": 1.5}, ClaimResponse)
    )
    assert "write it as 1" in str(wire_error({"lease": "l", "briefing_revision": 1.0}, ClaimResponse))


RUN_VIEW = {
    "run_id": "run-1",
    "scenario": "bridge_repair",
    "seed": 3,
    "status": "crashed",
    "sim_time_ms": 1200,
    "agents": [{"agent_id": "engineer-1", "role": "engineer", "controlled": True, "claimed": False}],
    "objectives": [{"id": "repair", "status": "pending"}],
    "result": None,
    "error": "ZeroDivisionError: division by zero",
    "pace": None,
    "decision_deadline_s": 60.0,
}


def test_run_view_round_trip() -> None:
    view = structure_or_error(RUN_VIEW, RunView)
    assert view.agents == [AgentView("engineer-1", "engineer", True, False)]
    data = converter.unstructure(view)
    assert data == RUN_VIEW and list(data) == list(RUN_VIEW)
    assert data["agents"][0] == RUN_VIEW["agents"][0] and type(data["agents"][0]) is dict


def test_run_view_errors_name_nested_paths() -> None:
    bad = {
        **RUN_VIEW,
        "status": "ended",
        "result": "x",
        "agents": [{"agent_id": "a", "role": "r", "controlled": True, "claimed": False, "lease": "l"}],
    }
    err = wire_error(bad, RunView)
    text = str(err)
    assert (
        "$.status: expected one of 'created', 'running', 'completed', 'failed', 'cancelled', 'crashed'"
        in text
    )
    assert "$.result: expected an object or null, got a string ('x')" in text
    assert (
        "unknown field 'lease' in an agent entry of the run view at $.agents[0]; "
        "valid fields: agent_id, claimed, controlled, role"
    ) in text


def test_problem_helper() -> None:
    body = problem(422, "command_id must be a string")
    assert body == {
        "type": "about:blank",
        "title": "Unprocessable Content",
        "status": 422,
        "detail": "command_id must be a string",
    }
    assert list(body) == ["type", "title", "status", "detail"]
    assert problem(413, "too big")["title"] == "Content Too Large"
    assert problem(410, "run ended: completed")["title"] == "Gone"
    assert problem(418, "x")["title"] == "I'm a Teapot"
    assert problem(599, "x")["title"] == "Error"
    custom = problem(409, "held", title="Agent already leased", type="https://example.org/lease-held")
    assert custom["type"] == "https://example.org/lease-held" and custom["title"] == "Agent already leased"
    assert structure_or_error(body, Problem) == Problem(**body)


def test_describe_type() -> None:
    assert describe_type(float | None) == "a number or null"
    assert describe_type(list[str]) == "an array of strings"


def test_make_converter_builds_independent_converters() -> None:
    other = make_converter()
    assert other is not converter
    assert other.structure({"lease": "l", "briefing_revision": 2}, ClaimResponse) == ClaimResponse("l", 2)


def test_terminal_run_statuses_are_defined_once_and_agree_with_the_engine() -> None:
    """Terminal = every run status but created/running; the engine ends in one of them, the server adds crashed."""
    from warren_sim.client._exceptions import RunEnded
    from warren_sim.engine import END_STATUSES
    from warren_sim.protocol.models import LIVE_RUN_STATUSES, RUN_STATUSES, TERMINAL_RUN_STATUSES

    assert TERMINAL_RUN_STATUSES == set(RUN_STATUSES) - LIVE_RUN_STATUSES
    assert TERMINAL_RUN_STATUSES - set(END_STATUSES) == {"crashed"}
    for status in TERMINAL_RUN_STATUSES:  # the SDK takes a 410's run_status member from the same set
        problem = {"type": "about:blank", "title": "Gone", "status": 410, "run_status": status,
                   "detail": f"run-1 has ended with status {status}; there will be no more observations"}
        assert RunEnded(410, problem).status == status
    prose_only = {"type": "about:blank", "title": "Gone", "status": 410, "detail": "run-1 has ended with status failed"}
    assert RunEnded(410, prose_only).status is None  # data, not prose: the SDK then asks the run itself
