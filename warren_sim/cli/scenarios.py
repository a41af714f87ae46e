"""``warren scenarios``: every scenario found, with its premise, agents and parameters."""

from __future__ import annotations

import argparse
from typing import Any

from ..scenarios import ScenarioError, list_scenarios, load_scenario, scenario_dirs
from ._common import EXIT_OK, add_scenarios_option, apply_scenarios_option, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "scenarios", help="list scenarios with their premise and agents",
                  description="List every scenario found (bundled, $WARREN_SCENARIOS, --scenarios DIR).")
    add_scenarios_option(p)
    p.set_defaults(func=cmd_scenarios)


def cmd_scenarios(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    for name in list_scenarios():
        try:
            sc = load_scenario(name)
        except ScenarioError as exc:
            print(f"{name}: cannot load: {exc}")
            continue
        spec = sc.spec
        print(f"{name} — {spec.premise}")
        agents = ", ".join(f"{a.id} ({a.role})" for a in spec.agents[:8])
        more = f" and {len(spec.agents) - 8} more" if len(spec.agents) > 8 else ""
        print(f"    agents: {agents}{more}")
        if spec.params:
            print("    params: " + ", ".join(f"{p.name}={p.default!r}" for p in spec.params))
    if not list_scenarios():
        print("no scenarios found in " + ", ".join(str(d) for d in scenario_dirs()))
    return EXIT_OK
