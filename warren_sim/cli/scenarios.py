"""``warren scenarios``: every scenario found, with its premise, agents and parameters."""

from __future__ import annotations

import argparse
from typing import Any

from ..scenarios import (
    ScenarioError,
    describe_population,
    list_scenarios,
    load_scenario,
    population_files,
    scenario_dirs,
)
from ._common import EXIT_OK, UsageError, add_scenarios_option, apply_scenarios_option, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "scenarios", help="list scenarios with their premise and agents",
                  description="List every scenario found (bundled, $WARREN_SCENARIOS, --scenarios DIR); with NAME, "
                              "one scenario: its roles, agents, parameters and partner populations.")
    p.add_argument("name", nargs="?", default=None, metavar="NAME", help="show this scenario only, in full")
    add_scenarios_option(p)
    p.set_defaults(func=cmd_scenarios)


def cmd_scenarios(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    if args.name is not None:
        return show_scenario(args.name)
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


def show_scenario(name: str) -> int:
    """``warren scenarios NAME``: the premise, roles, agents, parameters and populations, one line each."""
    try:
        sc = load_scenario(name)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    spec = sc.spec
    print(f"{sc.name} — {spec.premise}")
    print("  roles:")
    for r in spec.roles:
        agents = [a.id for a in spec.agents if a.role == r.name]
        shown = ", ".join(agents[:6]) + (f" and {len(agents) - 6} more" if len(agents) > 6 else "")
        print(f"    {r.name}: {r.description} ({shown or 'no agent'})")
    if spec.params:
        print("  params:")
        for p in spec.params:
            print(f"    {p.name} ({p.type}, default {p.default!r}): {p.description}")
    populations = population_files(sc)
    print("  populations (warren eval --focal ROLE=SPEC --partners NAME; docs/benchmarking.md):")
    print("    solution: the scenario's own solution.py plays every other agent")
    for pop, path in populations.items():
        print(f"    {pop}: {describe_population(path)}")
    return EXIT_OK
