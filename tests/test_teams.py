"""Mixed teams (--policy ROLE=SPEC / AGENT=SPEC) and the bundled partner populations."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from warren_sim.cli import main
from warren_sim.engine import NoopPolicy, run_headless
from warren_sim.evaluation.crossplay import crossplay
from warren_sim.scenarios import (
    PolicyError,
    describe_population,
    instantiate,
    load_scenario,
    parse_team,
    population_files,
)

MYPOLICY = textwrap.dedent('''
    """A policy that says which agents it was made for (mypolicy.MADE)."""
    MADE = []


    class Waiter:
        def decide(self, obs):
            return {"sleep_ms": 1000}


    def factory(agent_id, role, briefing):
        MADE.append(agent_id)
        return Waiter()
''')


@pytest.fixture
def mypolicy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "mypolicy.py").write_text(MYPOLICY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _kinds(policies: dict) -> dict[str, str]:
    return {a: type(p).__name__ for a, p in policies.items()}


def test_a_role_spec_drives_only_that_role(mypolicy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """warren run bridge_repair --seed 3 --policy engineer=mypolicy:factory: the engineer waits (the run fails),
    the courier and medic keep the solution's policies."""
    import mypolicy as module  # type: ignore[import-not-found]

    module.MADE.clear()
    code = main(["run", "bridge_repair", "--seed", "3", "--quiet", "--policy", "engineer=mypolicy:factory"])
    assert code == 1 and "failed" in capsys.readouterr().out
    assert module.MADE == ["engineer-1"]
    loaded = load_scenario("bridge_repair")
    _, policies = instantiate(loaded, 3, ["engineer=mypolicy:factory"])
    assert _kinds(policies) == {"engineer-1": "Waiter", "courier-1": "Carrier", "medic-1": "Carrier"}


def test_an_agent_spec_beats_its_role_which_beats_the_default(mypolicy: Path) -> None:
    loaded = load_scenario("relay")
    _, policies = instantiate(loaded, 0, ["none", "courier=mypolicy:factory", "courier-2=solution"])
    assert _kinds(policies) == {"steward-1": "NoopPolicy", "courier-1": "Waiter", "courier-2": "Courier"}
    # the same as a mapping (a served run's npc_policy), "*" for the default
    _, same = instantiate(loaded, 0, {"*": "none", "courier": "mypolicy:factory", "courier-2": "solution"})
    assert _kinds(same) == _kinds(policies)
    # no default: solution
    _, only = instantiate(loaded, 0, ["steward=none"])
    assert isinstance(only["steward-1"], NoopPolicy) and _kinds(only)["courier-1"] == "Courier"


def test_a_bad_team_spec_names_the_roles_and_agents() -> None:
    loaded = load_scenario("bridge_repair")
    with pytest.raises(PolicyError) as err:
        instantiate(loaded, 0, ["pilot=solution"])
    text = str(err.value)
    assert "'pilot' is neither a role nor an agent of bridge_repair" in text
    assert "roles: engineer, courier, medic" in text and "agents: engineer-1, courier-1, medic-1" in text
    with pytest.raises(PolicyError, match="roles: engineer, courier, medic"):
        instantiate(loaded, 0, ["courier=nosuchmodule:factory"])
    with pytest.raises(PolicyError, match="given twice"):
        parse_team(["courier=none", "courier=solution"])
    with pytest.raises(PolicyError, match="has no population 'nope'"):
        instantiate(loaded, 0, ["courier=population:nope"])


def test_the_cli_refuses_a_bad_team_with_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "bridge_repair", "--policy", "pilot=solution"]) == 2
    assert "roles: engineer, courier, medic" in capsys.readouterr().err
    assert main(["eval", "bridge_repair", "--seeds", "0-1", "--policy", "medic-9=none", "--jobs", "1"]) == 2
    assert "agents: engineer-1, courier-1, medic-1" in capsys.readouterr().err


def test_a_team_of_one_spec_is_the_plain_spec_byte_for_byte(tmp_path: Path) -> None:
    """--policy solution, no --policy and --policy solution --policy engineer=solution write the same trace."""
    traces = []
    for i, extra in enumerate([[], ["--policy", "solution"], ["--policy", "solution", "--policy", "engineer=solution"]]):
        trace = tmp_path / f"t{i}.jsonl"
        assert main(["run", "bridge_repair", "--seed", "3", "--quiet", "--trace", str(trace), *extra]) == 0
        traces.append(trace.read_bytes())
    assert traces[0] == traces[1] == traces[2]


def test_eval_takes_a_team(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "bridge_repair", "--seeds", "0-3", "--jobs", "1", "--json", "--quiet",
                 "--policy", "courier=none", "--policy", "medic=none"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["completion_rate"] == 0.0 and result["policy"] == "courier=none medic=none"


MULTI_ROLE = ("bridge_repair", "relay", "deadline")


@pytest.mark.parametrize("name", MULTI_ROLE)
def test_every_multi_role_scenario_ships_three_documented_populations(name: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_scenario(name)
    found = population_files(loaded)
    assert len(found) >= 3
    assert main(["scenarios", name]) == 0
    out = capsys.readouterr().out
    for pop, path in found.items():
        description = describe_population(path)
        assert len(description) > 20 and f"    {pop}: {description}" in out


#: The focal role whose numbers docs/benchmarking.md reports for each scenario.
FOCAL = {"bridge_repair": "engineer", "relay": "courier", "deadline": "mechanic"}


@pytest.mark.parametrize("name", MULTI_ROLE)
def test_three_populations_differ_measurably_from_solution_with_the_solution_focal(name: str) -> None:
    """With the solution as focal, three or more populations change the completion rate or the mean score
    (docs/benchmarking.md has the numbers over 100 seeds)."""
    results = crossplay(name, [f"{FOCAL[name]}=solution"], "all", range(20), jobs=1, baselines=False)
    cells = {c["population"]: c for c in results["cells"]}
    base = cells.pop("solution")
    differ = [p for p, c in cells.items()
              if c["completion_rate"] != base["completion_rate"] or abs(c["score"]["mean"] - base["score"]["mean"]) > 0.05]
    assert len(differ) >= 3, {p: (c["completion_rate"], c["score"]["mean"]) for p, c in cells.items()}


def test_a_noisy_population_is_seeded_by_the_run(tmp_path: Path) -> None:
    """The same seed gives the same run, another seed another one: its randomness is the run's."""
    loaded = load_scenario("bridge_repair")

    def run(seed: int) -> list:
        sim, policies = instantiate(loaded, seed, ["population:noisy", "engineer=solution"])
        run_headless(sim, policies)
        return [r for r in sim.drain_records() if r["kind"] == "command"]

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_fork_takes_a_team(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """warren fork ... --policy solution --policy engineer=none: the engineer idles after the fork point, so the
    fork fails where the parent completed; a bad key names the roles and agents."""
    parent = tmp_path / "parent.jsonl"
    assert main(["run", "bridge_repair", "--seed", "3", "--quiet", "--trace", str(parent)]) == 0
    capsys.readouterr()
    code = main(["fork", str(parent), "--cursor", "5", "--policy", "solution", "--policy", "engineer=none"])
    out = capsys.readouterr().out
    assert code == 1 and "failed" in out, out
    assert main(["fork", str(parent), "--cursor", "5", "--policy", "pilot=none"]) == 2
    assert "roles: engineer, courier, medic" in capsys.readouterr().err
