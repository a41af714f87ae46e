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

__all__ = ["LoadedScenario", "ParamText", "ScenarioError", "list_scenarios", "load_scenario", "scenario_dirs",
           "validate_params"]
