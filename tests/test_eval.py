"""``warren eval``: runs seeds headless and reports completion, sim time, decisions and score."""

from __future__ import annotations

import json
from typing import Any

import pytest

from warren_sim.cli import main
from warren_sim.evaluation import SeedsError, evaluate, p95, parse_seeds


def evaluate_one(scenario: str, seeds: list[int], policy: str = "solution", params: dict[str, Any] | None = None,
                 **kw: Any) -> dict[str, Any]:
    """The report of one scenario and setting, run in this process."""
    (result,) = evaluate(scenario, seeds, policy, params, jobs=1, **kw)["results"]
    return result


class Exploding:
    """A policy with a bug: it raises at its third decision (used through --policy test_eval:exploding)."""

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, obs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls >= 3:
            raise RuntimeError("policy bug on purpose")
        return {"sleep_ms": 1000}


def exploding(agent_id: str, role: str, briefing: dict[str, Any]) -> Exploding:
    return Exploding()


def test_seeds_parse_ranges_lists_and_single_seeds() -> None:
    """'0-3,7,5-6' gives those seeds in order, each once."""
    assert parse_seeds("0-3,7,5-6,2") == [0, 1, 2, 3, 7, 5, 6]
    assert parse_seeds("42") == [42]
    assert parse_seeds("0-99") == list(range(100))


@pytest.mark.parametrize("text", ["", "a-b", "5-3", "-1", "1-", "0-2,x"])
def test_bad_seeds_are_a_usage_error(text: str) -> None:
    """A seed spec that is not N, LOW-HIGH or a comma list of them is refused, saying the forms."""
    with pytest.raises(SeedsError, match="--seeds"):
        parse_seeds(text)


def test_p95_is_the_nearest_rank_percentile() -> None:
    """p95 of 1..100 is 95, of one value is that value, of 1..10 is 10."""
    assert p95([float(x) for x in range(100, 0, -1)]) == 95.0
    assert p95([7.0]) == 7.0
    assert p95([float(x) for x in range(1, 11)]) == 10.0


def test_evaluate_reports_completion_time_decisions_and_score() -> None:
    """The report of deadline over 10 seeds: all completed, mean/p95 sim time, decisions, score 1.0."""
    report = evaluate_one("deadline", list(range(10)))
    assert report["runs"] == 10 and report["completed"] == 10 and report["completion_rate"] == 1.0
    assert report["statuses"] == {"completed": 10}
    assert 0 < report["sim_time_ms"]["mean"] <= report["sim_time_ms"]["p95"] <= 75_000
    assert report["decisions"]["mean"] > 0
    assert report["score"]["mean"] == 1.0  # no score() in deadline's solution: fraction of objectives
    assert [r["seed"] for r in report["per_seed"]] == list(range(10))
    assert report["conflicts"] is None


def test_the_scenario_score_function_is_used_when_defined() -> None:
    """warren's solution.py defines score = seeds in the larder, so 30 foragers score 30."""
    report = evaluate_one("warren", [0, 1], params={"agents": 30})
    assert report["score"]["mean"] == 30.0
    assert report["params"] == {"agents": 30, "layout": 0}


def test_the_noop_policy_reports_failures_and_their_reasons() -> None:
    """With --policy none nobody meets the deadline: rate 0, score 0, the reason is grouped."""
    report = evaluate_one("deadline", [0, 1, 2], "none")
    assert report["completion_rate"] == 0.0 and report["score"]["mean"] == 0.0
    assert report["not_completed"] == [{"reason": "failed: objective pump missed its deadline at 40000 ms",
                                        "runs": 3}]


def test_conflicts_are_counted_from_the_journal() -> None:
    """--conflicts records the journal; contention loses same-batch races in every run."""
    report = evaluate_one("contention", list(range(5)), conflicts=True)
    assert report["conflicts"]["runs_with_conflicts"] == 5
    assert report["conflicts"]["mean"] >= 1
    assert all(r["conflicts"] <= r["rejected"] for r in report["per_seed"])


def test_a_policy_that_raises_is_reported_as_crashed() -> None:
    """A buggy policy does not stop the evaluation: its runs are crashed, with the exception named."""
    report = evaluate_one("bridge_repair", [0, 1], "test_eval:exploding")
    assert report["statuses"] == {"crashed": 2}
    assert "RuntimeError: policy bug on purpose" in report["not_completed"][0]["reason"]


def test_the_table_has_a_header_and_a_row_per_scenario(capsys) -> None:
    """warren eval A B prints a header, a rule, then one row per scenario with rate, times, score."""
    assert main(["eval", "deadline", "relay", "--seeds", "0-4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "warren eval: 5 seed(s) (0-4), policy solution"
    header = lines[2].split()
    assert header[:4] == ["scenario", "params", "runs", "completed"]
    for column in ("p95", "decisions", "score", "decisions/s"):
        assert column in header
    assert set(lines[3]) <= {"-", " "}
    rows = [line.split() for line in lines[4:6]]
    assert [r[0] for r in rows] == ["deadline", "relay"]
    assert rows[0][1] == "-" and rows[1][1] == "couriers=2,code=4721"
    assert all(r[2] == "5" and r[3] == "100.0%" for r in rows)
    assert len(lines) == 7  # nothing failed, so no reasons follow: only the line of the sweep's own time
    assert lines[6].startswith("  the sweep took ") and "wall-sum adds up" in lines[6]


def test_the_table_shows_conflicts_and_failure_reasons(capsys) -> None:
    """--conflicts adds a column; runs that did not complete are listed with their reason."""
    assert main(["eval", "contention", "--seeds", "0-2", "--conflicts"]) == 0
    out = capsys.readouterr().out
    assert "conflicts" in out.splitlines()[2]
    assert main(["eval", "deadline", "--seeds", "0-1", "--policy", "none"]) == 0
    out = capsys.readouterr().out
    assert "  deadline: 2 run(s) failed: objective pump missed its deadline at 40000 ms" in out
    assert " 0.0% " in out


def test_json_output_has_one_result_per_scenario(capsys) -> None:
    """--json prints seeds, policy and per-scenario results with the documented keys."""
    assert main(["eval", "warren", "contention", "--seeds", "0-2", "--param", "agents=20", "--json"]) == 2
    capsys.readouterr()  # contention has no 'agents': the usage error comes before any output
    assert main(["eval", "warren", "--seeds", "0-2", "--param", "agents=20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seeds"] == [0, 1, 2] and data["policy"] == "solution"
    (result,) = data["results"]
    assert {"scenario", "params", "policy", "runs", "completed", "completion_rate", "statuses", "sim_time_ms",
            "decisions", "score", "conflicts", "not_completed", "wall_s", "decisions_per_s",
            "per_seed"} <= set(result)
    assert result["scenario"] == "warren" and result["params"] == {"agents": 20, "layout": 0}
    assert set(result["sim_time_ms"]) == {"mean", "p95", "min", "max"}
    assert result["score"]["mean"] == 20.0 and result["completion_rate"] == 1.0
    assert [r["seed"] for r in result["per_seed"]] == [0, 1, 2]
    assert {"seed", "status", "reason", "sim_time_ms", "decisions", "score", "wall_s"} <= set(result["per_seed"][0])


def test_min_completion_turns_a_low_rate_into_exit_1(capsys) -> None:
    """--min-completion 1 exits 1 when a run did not complete, 0 when all did."""
    assert main(["eval", "deadline", "--seeds", "0", "--policy", "none", "--min-completion", "1"]) == 1
    assert main(["eval", "deadline", "--seeds", "0", "--min-completion", "1"]) == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["eval", "atlantis", "--seeds", "0"], "unknown scenario 'atlantis'"),
    (["eval", "deadline", "--seeds", "9-1"], "--seeds"),
    (["eval", "deadline", "--seeds", "0", "--policy", "nosuch"], "expected 'solution', 'random', 'none'"),
    (["eval", "deadline", "--seeds", "0", "--min-completion", "2"], "--min-completion must be a rate"),
])
def test_usage_errors_exit_2(argv: list[str], message: str, capsys) -> None:
    """An unknown scenario, bad seeds, a bad policy or a bad rate is a usage error: exit 2, a message."""
    assert main(argv) == 2
    assert message in capsys.readouterr().err
