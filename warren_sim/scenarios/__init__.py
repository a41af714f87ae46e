"""Scenario files: finding them, validating them, and building specs and policies from them."""

from .loader import (
    LoadedScenario,
    ParamText,
    ScenarioError,
    list_scenarios,
    load_scenario,
    scenario_dirs,
    validate_params,
)
from .policies import (
    PolicyError,
    PolicyFactory,
    TeamSpec,
    as_factory,
    describe_population,
    instantiate,
    make_policy,
    npc_team,
    parse_team,
    population_files,
    resolve_policy,
    resolve_team,
    team_text,
)

__all__ = ["LoadedScenario", "ParamText", "PolicyError", "PolicyFactory", "ScenarioError", "TeamSpec", "as_factory",
           "describe_population", "instantiate", "list_scenarios", "load_scenario", "make_policy", "npc_team", "parse_team", "population_files",
           "resolve_policy", "resolve_team", "scenario_dirs", "team_text", "validate_params"]
