"""The bundled scenarios (contention, relay, deadline, warren, bridge_repair) and scenario parameters.

Every bundled scenario with a solution.py completes on seeds 0..99 with its solution policies; each
scenario shows the thing it exists for (same-batch conflicts, a fact relayed by message, deadlines,
O(1) work per agent at scale); parameters are typed, bounded and refused with a teaching error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tiers import sizes

from warren_sim.cli import main
from warren_sim.engine import NoopPolicy, Simulation, briefing, run_headless
from warren_sim.evaluation import score_of
from warren_sim.scenarios import ParamText, ScenarioError, instantiate, load_scenario

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = sorted(d.name for d in (ROOT / "scenarios").iterdir()
                 if (d / "scenario.toml").is_file() and (d / "solution.py").is_file())
SEEDS = range(100)


@sizes(quick=range(10), ci=SEEDS, argname="seeds")  # warren's 100 seeds take ~6 s
@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_scenario_completes_on_seeds_0_to_99(name: str, seeds: range) -> None:
    """The solution policies complete the scenario, with its default parameters, for every seed tried (0-9 fast)."""
    sc = load_scenario(name)
    failures = []
    for seed in seeds:
        sim, policies = instantiate(sc, seed, "solution", record=False)
        summary = run_headless(sim, policies)
        if summary["status"] != "completed":
            failures.append((seed, summary["status"], summary["reason"]))
    assert failures == []


def test_the_new_scenarios_are_bundled() -> None:
    """contention, relay, deadline and warren exist next to bridge_repair, each with a premise."""
    for name in ("contention", "relay", "deadline", "warren", "bridge_repair"):
        assert name in BUNDLED
        assert load_scenario(name).spec.premise


# -- contention --------------------------------------------------------------------------------------
def _same_batch_conflicts(records: list[dict]) -> list[dict]:
    return [r for r in records if r["kind"] == "outcome" and r["outcome"] == "rejected" and r.get("conflict")]


def test_contention_has_same_batch_conflicts_on_most_seeds_and_still_completes() -> None:
    """Two potters take the same tongs in one batch: the loser is rejected, and every run completes."""
    sc = load_scenario("contention")
    with_conflicts = 0
    for seed in SEEDS:
        sim, policies = instantiate(sc, seed, "solution", record=True)
        records: list[dict] = []
        summary = run_headless(sim, policies, on_batch=lambda s, out=records: out.extend(s.drain_records()))
        records.extend(sim.drain_records())
        assert summary["status"] == "completed", (seed, summary["reason"])
        conflicts = _same_batch_conflicts(records)
        if conflicts:
            with_conflicts += 1
            # The conflict names the winner, who took the item at that very instant; the prose says the same.
            first = conflicts[0]
            took = [r for r in records if r["kind"] == "event" and r.get("event") == "took" and r["t"] == first["t"]]
            assert {"winner": first["conflict"]["winner"], "resource": first["conflict"]["resource"]} in [
                {"winner": r["agent"], "resource": r["item"]} for r in took]
            assert first["conflict"]["winner"] in first["reason"] and "earlier in this batch" in first["reason"]
    assert with_conflicts >= 90


def test_contention_parameters_shape_the_world_and_refuse_a_world_without_scarcity() -> None:
    """potters/tongs/pots set the agents, items and target; as many tongs as potters is refused."""
    spec = load_scenario("contention", {"potters": 6, "tongs": 3, "pots": 3}).spec
    assert [a.id for a in spec.agents] == [f"potter-{i}" for i in range(1, 7)]
    assert sum(1 for i in spec.items if i.kind == "tongs") == 3
    assert sum(1 for i in spec.items if i.kind == "pot") == 18
    assert spec.objectives[0].target == 18
    with pytest.raises(ScenarioError, match=r"tongs \(4\) must be fewer than potters \(4\)"):
        load_scenario("contention", {"potters": 4, "tongs": 4})


# -- relay -------------------------------------------------------------------------------------------
def test_relay_code_is_known_only_to_the_steward() -> None:
    """The vault code is in the steward's notes and in no courier's briefing."""
    sc = load_scenario("relay", {"code": "9-1-7"})
    sim = Simulation(sc.spec, 0)
    assert "9-1-7" in briefing(sim, "steward-1")["notes"]
    for agent in sc.spec.agents:
        if agent.role == "courier":
            assert "9-1-7" not in str(briefing(sim, agent.id))


def test_relay_unlocks_only_after_the_code_travelled_by_message() -> None:
    """The first unlock comes after the steward told that courier the code."""
    sim, policies = instantiate(load_scenario("relay", {}), 5, "solution")
    summary = run_headless(sim, policies)
    records = sim.drain_records()
    assert summary["status"] == "completed"
    first_unlock = next(r for r in records if r["kind"] == "command" and r["command"].get("action") == "unlock")
    told = [r for r in records if r["kind"] == "message" and r["from"] == "steward-1"
            and r["to"] == first_unlock["agent"] and "4721" in r["text"]]
    assert told and told[0]["t"] < first_unlock["t"]


def test_relay_cannot_complete_when_the_steward_keeps_silent() -> None:
    """With a steward that never answers, the couriers never learn the code and the run fails."""
    sc = load_scenario("relay")
    sim, policies = instantiate(sc, 0, "solution", record=False)
    policies["steward-1"] = NoopPolicy()
    summary = run_headless(sim, policies)
    assert summary["status"] == "failed"
    assert "time limit" in summary["reason"]
    assert summary["objectives"][0]["status"] == "pending"


def test_relay_code_parameter_stays_a_string_from_the_command_line() -> None:
    """--param code=0042 is the string '0042' (not the number 42), and the run completes with it."""
    sim, policies = instantiate(load_scenario("relay", {"code": ParamText("0042"), "couriers": ParamText("3")}), 1, "solution",
                              record=False)
    assert sim.world.structures["door"].secret == "0042"
    assert run_headless(sim, policies)["status"] == "completed"


# -- deadline ----------------------------------------------------------------------------------------
def test_deadline_noop_policy_fails_with_the_deadline_reason() -> None:
    """Doing nothing misses the pump's deadline: the run fails at t=40 s naming the objective."""
    sim, policies = instantiate(load_scenario("deadline", {}), 0, "none", record=False)
    summary = run_headless(sim, policies)
    assert summary["status"] == "failed"
    assert summary["reason"] == "objective pump missed its deadline at 40000 ms"
    assert summary["sim_time_ms"] == 40000
    assert summary["objectives"][0]["status"] == "failed"


def test_deadline_solution_meets_every_deadline_with_a_margin() -> None:
    """The solution completes each objective before its deadline (the journal has when)."""
    spec = load_scenario("deadline").spec
    deadlines = {o.id: o.deadline_ms for o in spec.objectives}
    assert all(d is not None for d in deadlines.values())
    sim, policies = instantiate(load_scenario("deadline", {}), 7, "solution")
    run_headless(sim, policies)
    done = {r["id"]: r["t"] for r in sim.drain_records() if r["kind"] == "objective" and r["status"] == "completed"}
    assert set(done) == set(deadlines)
    for oid, t in done.items():
        assert t <= deadlines[oid] - 10_000, (oid, t)


# -- warren ------------------------------------------------------------------------------------------
def test_warren_at_200_agents_completes_and_scores() -> None:
    """200 foragers fill the larder on seeds 0..9: the score (seeds in the larder) is 200, shuffled too."""
    for params in ({"agents": 200}, {"agents": 200, "layout": 11}):
        sc = load_scenario("warren", params)
        assert len(sc.spec.agents) == 200
        for seed in range(10):
            sim, policies = instantiate(sc, seed, "solution", record=False)
            summary = run_headless(sim, policies)
            assert summary["status"] == "completed", (params, seed, summary["reason"])
            assert score_of(sc, summary, sim) == 200.0


def test_warren_work_per_agent_stays_constant_as_it_grows() -> None:
    """Decisions per forager stay at about seven and the larder never holds more than eight at once."""
    for n in (50, 2000):
        sc = load_scenario("warren", {"agents": n})
        sim, policies = instantiate(sc, 0, "solution", record=False)
        larder = sim.world.resolve_cell("larder")
        crowd = [0]

        def watch(s: Simulation, larder=larder, crowd=crowd) -> None:
            crowd[0] = max(crowd[0], len(s.world.agents_at.get(larder, ())))

        summary = run_headless(sim, policies, on_batch=watch)
        assert summary["status"] == "completed"
        assert summary["decisions"] <= 7 * n
        assert crowd[0] <= 8


def test_warren_expansion_is_deterministic_and_gives_everyone_a_cell_of_its_own() -> None:
    """The same params give the same spec; burrows and patches are distinct cells, none is the larder."""
    a, b = load_scenario("warren", {"agents": 500, "layout": 3}).spec, load_scenario("warren", {"agents": 500,
                                                                                                  "layout": 3}).spec
    assert a == b
    cells = [x.at for x in a.agents] + [i.at for i in a.items]
    assert len(set(cells)) == len(cells) == 1000
    larder = next(p for p in a.places if p.name == "larder")
    assert f"warren:{larder.x},{larder.y}" not in cells
    assert load_scenario("warren", {"agents": 500}).spec != a  # layout permutes who lives where


# -- parameters --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("params", "message"), [
    ({"agent": 10}, "scenario warren has no parameter 'agent'; its parameters: agents (int, default 100), "
                    "layout (int, default 0); did you mean 'agents'?"),
    ({"agents": "many"}, "parameter agents of warren must be a int, got str 'many'"),
    ({"agents": 2.5}, "parameter agents of warren must be a int, got float 2.5"),
    ({"agents": True}, "parameter agents of warren must be a int, got bool True"),
    ({"agents": 0}, "parameter agents of warren must be between 1 and 100000, got 0"),
    ({"agents": 100001}, "parameter agents of warren must be between 1 and 100000, got 100001"),
    ({"agents": ParamText("1e3")}, "parameter agents of warren must be a int, got '1e3'; for example "
                                   "--param agents=100"),
    ({"layout": -1}, "parameter layout of warren must be between 0 and 1000000, got -1"),
])
def test_a_bad_parameter_is_refused_with_a_teaching_message(params: dict, message: str) -> None:
    """Unknown, wrongly typed and out-of-bounds parameters raise ScenarioError saying what is allowed."""
    with pytest.raises(ScenarioError) as info:
        load_scenario("warren", params)
    assert str(info.value) == message


def test_a_scenario_without_parameters_says_so() -> None:
    """Giving a parameter to a scenario that declares none says it takes none."""
    with pytest.raises(ScenarioError, match="scenario deadline has no parameter 'agents'; it takes no parameters"):
        load_scenario("deadline", {"agents": 3})


def test_command_line_text_is_read_by_the_declared_type() -> None:
    """ParamText '1000' is an int for an int parameter, '0042' stays a str for a str parameter."""
    assert load_scenario("warren", {"agents": ParamText("12")}).params == {"agents": 12, "layout": 0}
    assert load_scenario("relay", {"code": ParamText("0042")}).params["code"] == "0042"


TOML = '''
name = "knobs"
premise = "Test parameter declarations."
{params}
[[spaces]]
name = "s"
width = 2
height = 2

[[places]]
name = "p"
space = "s"
x = 0
y = 0

[[structures]]
id = "box"
kind = "box"
name = "a box"
place = "p"

[[roles]]
name = "r"

[[agents]]
id = "a-1"
role = "r"
name = "A"
at = "p"

[[objectives]]
id = "o"
description = "Fill the box."
structure = "box"
field = "n"
target = 1
'''


def _write(tmp_path: Path, params: str, expand: str | None = None) -> Path:
    directory = tmp_path / "knobs"
    directory.mkdir()
    (directory / "scenario.toml").write_text(TOML.format(params=params), encoding="utf-8")
    if expand is not None:
        (directory / "expand.py").write_text(expand, encoding="utf-8")
    return directory


@pytest.mark.parametrize(("params", "expected"), [
    ('[[params]]\nname = "n"\ntype = "int"\ndefault = 9\nmin = 1\nmax = 5\n',
     "params[0].default: expected a default that is a valid value: the default must be between 1 and 5, got 9"),
    ('[[params]]\nname = "n"\ntype = "int"\ndefault = 2\nmin = 5\nmax = 1\n', "params[0].max: expected a number >= min (5)"),
    ('[[params]]\nname = "s"\ntype = "str"\ndefault = "x"\nmin = 1\n',
     "params[0].min: expected no min for a str parameter"),
    ('[[params]]\nname = "n"\ntype = "int"\ndefault = 1\nchoices = ["1"]\n',
     "params[0].choices: expected no choices for a non-str parameter"),
    ('[[params]]\nname = "s"\ntype = "str"\ndefault = "z"\nchoices = ["x", "y"]\n',
     "params[0].default: expected a default that is a valid value: the default must be one of ['x', 'y']"),
    ('[[params]]\nname = "n"\ntype = "int"\ndefault = 1\n[[params]]\nname = "n"\ntype = "int"\ndefault = 2\n',
     "params[1].name: expected a unique parameter name, got str 'n'"),
    ('[[params]]\nname = "two words"\ntype = "int"\ndefault = 1\n',
     "params[0].name: expected a parameter name of letters, digits and _"),
])
def test_a_bad_parameter_declaration_fails_at_load(tmp_path: Path, params: str, expected: str) -> None:
    """A [[params]] table with an impossible default, bounds or choices names the key to fix."""
    directory = _write(tmp_path, params)
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(directory))
    assert str(info.value).startswith(str(directory / "scenario.toml") + ": ")
    assert expected in str(info.value)


def test_float_and_bool_parameters_read_text_and_normalise(tmp_path: Path) -> None:
    """A float parameter given 3 comes out 3.0; bool text reads true/false/yes/no; bad text is refused."""
    directory = _write(tmp_path, '[[params]]\nname = "rate"\ntype = "float"\ndefault = 1\nmin = 0\n'
                                 '[[params]]\nname = "loud"\ntype = "bool"\ndefault = false\n')
    sc = load_scenario(str(directory), {"rate": 3, "loud": ParamText("yes")})
    assert sc.params == {"rate": 3.0, "loud": True} and isinstance(sc.params["rate"], float)
    assert load_scenario(str(directory)).params == {"rate": 1.0, "loud": False}
    with pytest.raises(ScenarioError, match=r"parameter loud of knobs must be a bool \(true or false\), got 'maybe'"):
        load_scenario(str(directory), {"loud": ParamText("maybe")})
    with pytest.raises(ScenarioError, match="parameter rate of knobs must be at least 0, got -1.0"):
        load_scenario(str(directory), {"rate": ParamText("-1")})


def test_expand_refusing_parameters_or_returning_nothing_is_a_scenario_error(tmp_path: Path) -> None:
    """expand.py raising ValueError teaches through ScenarioError; returning a non-dict is named too."""
    directory = _write(tmp_path, '[[params]]\nname = "n"\ntype = "int"\ndefault = 1\n',
                       "def expand(data, params):\n"
                       "    if params['n'] > 3:\n"
                       "        raise ValueError('n above 3 leaves no room')\n"
                       "    return None if params['n'] == 2 else data\n")
    assert load_scenario(str(directory)).params == {"n": 1}
    with pytest.raises(ScenarioError, match=r"scenario knobs: parameters \{'n': 4\}: n above 3 leaves no room"):
        load_scenario(str(directory), {"n": 4})
    with pytest.raises(ScenarioError, match=r"expand\.py: expand\(data, params\) must return the scenario data"):
        load_scenario(str(directory), {"n": 2})


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "warren", "--param", "agents=0"], "parameter agents of warren must be between 1 and 100000, got 0"),
    (["run", "warren", "--param", "agnets=5"], "did you mean 'agents'?"),
    (["run", "warren", "--param", "agents=lots"], "parameter agents of warren must be a int, got 'lots'"),
    (["run", "warren", "--param", "agents"], "--param expects NAME=VALUE"),
    (["eval", "warren", "--seeds", "0", "--param", "agents=100001"], "must be between 1 and 100000"),
])
def test_bad_parameters_on_the_command_line_exit_2(argv: list[str], message: str, capsys) -> None:
    """warren run/eval with a bad --param prints the teaching message and exits 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err


def test_warren_run_takes_parameters_from_the_command_line(capsys) -> None:
    """warren run warren --param agents=30 runs 30 foragers to completion."""
    assert main(["run", "warren", "--param", "agents=30", "--seed", "2", "--quiet"]) == 0
    assert "30/30" in capsys.readouterr().out
