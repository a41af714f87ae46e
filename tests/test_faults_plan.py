"""The fault plan: SPECs read with teaching errors, and faults a pure function of the seed and the request."""

from __future__ import annotations

import pytest

from warren_sim.runtime.faults import NETWORK_KINDS, FaultPlan, FaultSpecError, parse_faults


def test_a_spec_names_rates_per_kind_and_all_fills_the_network_kinds():
    spec = parse_faults("lost_reply=0.2, reset=0.1")
    assert dict(spec.rates) == {"reset": 0.1, "lost_reply": 0.2}
    every = parse_faults("all=0.15,reset=0.5")
    assert {k: every.rates[k] for k in NETWORK_KINDS} == {**dict.fromkeys(NETWORK_KINDS, 0.15), "reset": 0.5}
    assert "expire" not in every.rates and "restart" not in every.rates
    assert every.delay_bound_s == 1.0


@pytest.mark.parametrize(("spec", "bound"), [("delay=0.1:2s", 2.0), ("delay=0.5:250ms", 0.25), ("delay=1:3", 3.0)])
def test_delay_takes_a_bound(spec, bound):
    assert parse_faults(spec).delay_bound_s == bound


@pytest.mark.parametrize(("spec", "words"), [
    ("", "empty fault SPEC"),
    ("lost_replies=0.2", "did you mean lost_reply"),
    ("bogus=0.1", "unknown fault kind 'bogus'"),
    ("restarts=0.1", "did you mean restart"),
    ("reset=1.5", "from 0 to 1"),
    ("reset=-0.1", "from 0 to 1"),
    ("reset=nan", "from 0 to 1"),
    ("reset=often", "is not a number"),
    ("reset", "expected kind=rate"),
    ("delay=0.1", "expected delay=RATE:BOUND"),
    ("delay=0.1:2h", "expected delay=RATE:BOUND"),
    ("delay=0.1:0s", "above 0"),
    ("reset=0.1,reset=0.2", "given twice"),
])
def test_a_bad_spec_is_a_teaching_error(spec, words):
    with pytest.raises(FaultSpecError, match=words):
        parse_faults(spec)


def _walk(plan: FaultPlan, n: int = 200) -> list[tuple[str, str, int] | None]:
    out = []
    for i in range(n):
        agent = f"a-{i % 3}"
        request = ("claim", "poll", "submit", "receipt")[i % 4]
        f = plan.decide(agent, request)
        out.append(None if f is None else (f.fault, f.request, f.index))
    return out


def test_the_same_seed_meets_the_same_faults_and_another_seed_others():
    spec = parse_faults("all=0.15,expire=0.1")
    first, again = _walk(FaultPlan(spec, 7, "run-1")), _walk(FaultPlan(spec, 7, "run-1"))
    assert first == again
    assert first != _walk(FaultPlan(spec, 8, "run-1"))
    assert first != _walk(FaultPlan(spec, 7, "run-2"))


def test_rates_hold_over_many_requests_and_kinds_apply_where_they_may():
    plan = FaultPlan(parse_faults("redeliver=0.3,expire=0.3,disconnect=1"), 1, "run-1")
    met = [plan.decide("a", r) for r in ("claim", "poll", "submit") * 2000]
    kinds = {(f.fault, f.request) for f in met if f is not None}
    assert ("redeliver", "poll") in kinds and ("expire", "submit") in kinds
    assert not any(k == "redeliver" and r != "poll" for k, r in kinds)  # redeliver: polls only
    assert not any(k == "expire" and r == "claim" for k, r in kinds)  # a claim carries no lease to expire
    assert not any(k == "disconnect" for k, _ in kinds)  # HTTP requests never meet a WebSocket close
    polls = sum(1 for f in met[1::3] if f is not None and f.fault == "redeliver")
    assert 0.17 < polls / 2000 < 0.25  # 0.3 of the polls that expire did not take first (0.7 x 0.3)
    ws = FaultPlan(parse_faults("disconnect=1"), 1, "run-1")
    assert ws.decide("a", "submit", websocket=True).fault == "disconnect"


def test_indices_count_each_agents_requests_of_each_kind_and_faults_are_recorded():
    plan = FaultPlan(parse_faults("lost_reply=1"), 3, "run-1")
    faults = [plan.decide("a", "submit"), plan.decide("b", "submit"), plan.decide("a", "submit"),
              plan.decide("a", "poll")]
    assert [(f.agent_id, f.request, f.index) for f in faults] == [("a", "submit", 0), ("b", "submit", 0),
                                                                   ("a", "submit", 1), ("a", "poll", 0)]
    assert faults[2].record() == {"kind": "fault", "fault": "lost_reply", "agent_id": "a", "request": "submit",
                                  "index": 1}
    assert plan.tally() == {"lost_reply": 4} and plan.tally("b") == {"lost_reply": 1}


def test_a_delay_is_bounded_and_reproducible():
    plan = FaultPlan(parse_faults("delay=1:2s"), 5, "run-1")
    delays = [plan.decide("a", "poll").delay_s for _ in range(100)]
    assert all(0 <= d < 2.0 for d in delays) and len(set(delays)) > 50
    again = FaultPlan(parse_faults("delay=1:2s"), 5, "run-1")
    assert delays == [again.decide("a", "poll").delay_s for _ in range(100)]
