"""What a server says about its scenarios without running one: ``GET /v1/scenarios`` and ``GET /v1/scenarios/{name}``.

The description carries the world's layout (:func:`warren_sim.engine.layout`), the same dict a run writes into its
journal's ``run`` record, so a viewer draws a live run and a journal file the same way. Parameters come as JSON
text (``?params=<JSON object>``), typed exactly like the ``params`` of the run creation body (an integer parameter
takes a JSON number, not a string), because the layout of a parameterised world (``warren`` with 10,000 foragers)
depends on them. Here, in the runtime, because describing a world means building it: the HTTP layer asks, and
never reaches into the engine itself.
"""

from __future__ import annotations

from typing import Any

from ..engine import layout
from ..engine.sim import Simulation
from ..protocol.strict_json import StrictJSONError, loads_strict
from ..scenarios import ScenarioError, describe_population, list_scenarios, load_scenario, population_files
from .errors import RunError

__all__ = ["describe_scenario", "scenario_summaries"]

_PARAMS_EXAMPLE = 'query parameter params must be a JSON object such as {"agents": 1000}'


def scenario_summaries() -> list[dict[str, Any]]:
    """Every scenario that loads with its defaults: name, title, premise and number of agents."""
    out = []
    for name in list_scenarios():
        try:
            spec = load_scenario(name).spec
        except ScenarioError:
            continue
        out.append({"name": name, "title": spec.title, "premise": spec.premise, "agents": len(spec.agents)})
    return out


def _params(raw: str | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    try:
        value = loads_strict(raw)
    except StrictJSONError as exc:
        raise RunError(400, f"{_PARAMS_EXAMPLE}: {exc}") from None
    if not isinstance(value, dict):
        raise RunError(400, f"{_PARAMS_EXAMPLE}, got {type(value).__name__}")
    return value


def describe_scenario(name: str, raw_params: str | None = None) -> dict[str, Any]:
    """The description of scenario ``name`` (params given as JSON text, or None for the defaults); 404 for an
    unknown scenario, 400 for parameters it refuses. Builds the world: a large one takes a while (call it off the
    event loop)."""
    if name not in list_scenarios():
        raise RunError(404, f"unknown scenario {name!r}; valid scenarios: {', '.join(list_scenarios())}")
    params = _params(raw_params)
    try:
        loaded = load_scenario(name, params)
    except ScenarioError as exc:
        raise RunError(400, str(exc)) from None
    spec = loaded.spec
    world = Simulation(spec, 0, record=False).world  # the world before anything happens
    return {
        "name": name, "title": spec.title, "premise": spec.premise,
        "roles": [{"name": r.name, "description": r.description, "tools": list(r.tools)} for r in spec.roles],
        "agents": [{"agent_id": a.id, "role": a.role, "name": a.name} for a in spec.agents],
        "objectives": [{"id": o.id, "description": o.description, "target": o.target,
                        "deadline_ms": o.deadline_ms} for o in spec.objectives],
        "parameters": [{"name": p.name, "type": p.type, "default": p.default, "description": p.description,
                        "min": p.minimum, "max": p.maximum} for p in spec.params],
        "params": dict(sorted(loaded.params.items())),
        "layout": layout(world, spec),
        "populations": [{"name": n, "description": describe_population(path)}
                        for n, path in population_files(loaded).items()],
    }
