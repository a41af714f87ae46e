"""The scenario loader: a malformed file fails at load with the file, the key path and the expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from warren_sim.scenarios import ScenarioError, list_scenarios, load_scenario

VALID = '''
name = "tiny"
premise = "Fix the wall."

[conventions]
step_ms = 500

[[params]]
name = "planks"
type = "int"
default = 2
min = 1
max = 5

[[spaces]]
name = "town"
width = 8
height = 4

[[spaces]]
name = "isle"
width = 4
height = 4

[[places]]
name = "yard"
space = "town"
x = 0
y = 0

[[places]]
name = "gate"
space = "town"
x = 7
y = 0

[[links]]
id = "ferry"
a = "town:7,0"
b = "isle:0,0"
steps = 2
gate = { structure = "wall", field = "strength", at_least = 1 }

[[structures]]
id = "wall"
kind = "wall"
name = "the wall"
place = "gate"
fields = { strength = 0 }
maxima = { strength = 2 }

[[tools]]
name = "fix"
description = "Fix a wall."
structure_kinds = ["wall"]
item_kinds = ["plank"]
field = "strength"

[[roles]]
name = "worker"
description = "Works."
tools = ["fix"]

[[agents]]
id = "alice"
role = "worker"
name = "Alice"
at = "yard"

[[agents]]
id = "bob"
role = "worker"
name = "Bob"
at = "gate"

[[items]]
id = "plank-1"
kind = "plank"
at = "yard"

[[objectives]]
id = "fortify"
description = "Make the wall strong."
structure = "wall"
field = "strength"
target = 2
'''


def write(tmp_path: Path, text: str, name: str = "tiny") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "scenario.toml").write_text(text, encoding="utf-8")
    return directory


def edit(old: str, new: str) -> str:
    assert VALID.count(old) == 1, old
    return VALID.replace(old, new)


def test_the_valid_base_loads(tmp_path: Path) -> None:
    """The base file of these tests loads, with its defaults and parameters filled in."""
    sc = load_scenario(str(write(tmp_path, VALID)))
    assert sc.name == "tiny" and sc.solution is None
    assert sc.params == {"planks": 2}
    assert [a.id for a in sc.spec.agents] == ["alice", "bob"]
    assert sc.spec.conventions.step_ms == 500 and sc.spec.conventions.tick_ms == 1000
    assert sc.spec.items[0].name == "plank"  # name defaults to the kind


CASES = {
    "invalid TOML": (edit('premise = "Fix the wall."', 'premise = "Fix the wall.'), ["not valid TOML", "line"]),
    "missing required key": (edit('premise = "Fix the wall."\n', ""),
                             ["premise: expected a string (this key is required)"]),
    "wrong type": (edit("width = 8", 'width = "8"'), ["spaces[0].width: expected an integer, got str '8'"]),
    "negative integer": (edit("steps = 2", "steps = -2"), ["links[0].steps: expected an integer >= 0, got int -2"]),
    "unknown key": (edit('name = "Bob"', 'name = "Bob"\ncolour = "red"'),
                    ["agents[1].colour: expected one of the known keys (id, role, name, at, notes)",
                     "this key is unknown"]),
    "unknown top-level key": ("spells = 3\n" + VALID, ["spells: expected one of the known keys"]),
    "unknown role": (edit('role = "worker"\nname = "Bob"', 'role = "pilot"\nname = "Bob"'),
                     ["agents[1].role: expected one of the roles (worker), got str 'pilot'"]),
    "unknown role tool": (edit('tools = ["fix"]', 'tools = ["fly"]'),
                          ["roles[0].tools[0]: expected one of the scenario's [[tools]] (fix), got str 'fly'"]),
    "unknown structure in objective": (edit('structure = "wall"\nfield = "strength"\ntarget',
                                            'structure = "tower"\nfield = "strength"\ntarget'),
                                       ["objectives[0].structure: expected one of the structures (wall), "
                                        "got str 'tower'"]),
    "unknown structure in gate": (edit('gate = { structure = "wall"', 'gate = { structure = "tower"'),
                                  ["links[0].gate.structure: expected one of the structures (wall)"]),
    "duplicate agent id": (edit('id = "bob"', 'id = "alice"'),
                           ["agents[1].id: expected a unique id, got 'alice' a second time"]),
    "duplicate place name": (edit('name = "gate"\nspace', 'name = "yard"\nspace'),
                             ["places[1].name: expected a unique name, got 'yard' a second time"]),
    "place outside the grid": (edit('x = 7\ny = 0', 'x = 8\ny = 0'),
                               ["places[1].x: expected a column that keeps the place inside the 8x4 grid of town",
                                "got int 8"]),
    "place on an unknown space": (edit('space = "town"\nx = 7', 'space = "moon"\nx = 7'),
                                  ["places[1].space: expected one of the spaces (town, isle), got str 'moon'"]),
    "generic tool redefined": (edit('name = "fix"\ndescription', 'name = "take"\ndescription'),
                               ["tools[0].name: expected a name other than the generic tools"]),
    "bad lane": (edit('description = "Fix a wall."', 'description = "Fix a wall."\nlane = "legs"'),
                 ["tools[0].lane: expected one of body, voice, got str 'legs'"]),
    "zero tick": (edit("step_ms = 500", "step_ms = 500\ntick_ms = 0"),
                  ["conventions.tick_ms: expected an integer >= 1, got int 0"]),
    "unknown convention": (edit("step_ms = 500", "step_ms = 500\nspeed = 2"),
                           ["conventions.speed: expected one of the known keys"]),
    "bad param default": (edit("default = 2", 'default = "two"'),
                          ["params[0].default: expected a int, got str 'two'"]),
    "bad param type": (edit('type = "int"', 'type = "integer"'),
                       ["params[0].type: expected one of int, float, str, bool, got str 'integer'"]),
    "array of tables expected": ('items = "plank"\n' + edit('[[items]]\nid = "plank-1"\nkind = "plank"\n'
                                                            'at = "yard"\n', ""),
                                 ["items: expected an array of tables ([[items]]), got str 'plank'"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_broken_file_names_file_key_path_and_expectation(tmp_path: Path, case: str) -> None:
    """Each broken file raises ScenarioError naming the file, where in it, and what was expected."""
    text, expected = CASES[case]
    directory = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(directory))
    message = str(info.value)
    assert message.startswith(str(directory / "scenario.toml") + ": "), message
    for part in expected:
        assert part in message, message


def test_an_unknown_parameter_names_the_valid_ones(tmp_path: Path) -> None:
    """A parameter the scenario does not declare is refused with the declared ones listed."""
    directory = write(tmp_path, VALID)
    with pytest.raises(ScenarioError, match=r"scenario tiny has no parameter 'plonks'; its parameters: "
                                            r"planks \(int, default 2\)"):
        load_scenario(str(directory), {"plonks": 3})


@pytest.mark.parametrize(("value", "expected"), [
    ("three", "parameter planks of tiny must be a int, got str 'three'"),
    (True, "parameter planks of tiny must be a int, got bool True"),
    (9, "parameter planks of tiny must be between 1 and 5, got 9"),
])
def test_a_bad_parameter_value_says_what_is_allowed(tmp_path: Path, value: object, expected: str) -> None:
    """A parameter of the wrong type or out of bounds is refused naming the bounds."""
    directory = write(tmp_path, VALID)
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(directory), {"planks": value})
    assert str(info.value) == expected


def test_an_unknown_scenario_lists_the_known_ones() -> None:
    """Loading a name that is neither a directory nor a known scenario names the known scenarios."""
    with pytest.raises(ScenarioError, match=r"unknown scenario 'atlantis'; known scenarios: .*bridge_repair"):
        load_scenario("atlantis")


def test_bridge_repair_is_listed_and_loads() -> None:
    """The bundled scenario loads with its solution policies."""
    assert "bridge_repair" in list_scenarios()
    sc = load_scenario("bridge_repair")
    assert sc.spec.premise == "Repair the storm-damaged bridge and resupply the clinic."
    assert sc.solution is not None and callable(sc.solution.make_policy)


def test_the_scenario_path_environment_variable_adds_directories(tmp_path: Path, monkeypatch) -> None:
    """$WARREN_SCENARIOS makes scenarios in other directories loadable by name."""
    write(tmp_path, VALID)
    monkeypatch.setenv("WARREN_SCENARIOS", str(tmp_path))
    assert "tiny" in list_scenarios()
    assert load_scenario("tiny").spec.name == "tiny"
