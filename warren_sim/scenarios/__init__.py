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
from .policies import PolicyError, PolicyFactory, instantiate, resolve_policy

__all__ = ["LoadedScenario", "ParamText", "PolicyError", "PolicyFactory", "ScenarioError", "instantiate",
           "list_scenarios", "load_scenario", "resolve_policy", "scenario_dirs", "validate_params"]
