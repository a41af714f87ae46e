"""What a sweep runs: scenarios x parameter settings (``--param`` fixed, ``--grid`` varied) x seeds.

The plan is built and validated in the caller's process before any work starts, so a typo in a
parameter is one clear error, not a thousand failed seeds. Its order is the report's order: scenarios
as given, then grid settings (the product of the ``--grid`` values, first key slowest), then seeds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..scenarios import LoadedScenario, ParamText, PolicyError, as_factory, instantiate, load_scenario
from .runs import Task

MAX_SEEDS = 1_000_000


class SweepError(ValueError):
    """A sweep that cannot start (bad seeds, grid, backend or --out file); the message says what to write."""


class SeedsError(SweepError):
    """A ``--seeds`` text that is not a seed list; the message says what the form is."""


@attrs.frozen
class Group:
    """One (scenario, parameter setting): a row of the report. ``params`` are the validated values."""

    scenario: str  # as the user named it (a name or a directory): what workers load
    name: str  # the scenario's own name
    params: Mapping[str, Any]


@attrs.frozen
class Plan:
    groups: tuple[Group, ...]
    seeds: tuple[int, ...]
    policy: str
    conflicts: bool

    def tasks(self) -> list[Task]:
        return [Task(g.scenario, g.params, seed, self.policy, self.conflicts, g.name)
                for g in self.groups for seed in self.seeds]


def parse_seeds(text: str) -> list[int]:
    """``'0-99'`` -> 0..99; ``'0-9,20,30-39'`` -> those; duplicates are kept once, in the order given."""
    seeds: dict[int, None] = {}
    for part in text.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        try:
            a = int(low)
            b = int(high) if sep else a
        except ValueError:
            raise SeedsError(f"--seeds: {part!r} is not a seed or a range; write '0-99', '7' or "
                             "'0-9,20,30-39' (seeds are integers >= 0)") from None
        if a < 0 or b < a:
            raise SeedsError(f"--seeds: {part!r} must be N or LOW-HIGH with 0 <= LOW <= HIGH")
        if len(seeds) + (b - a + 1) > MAX_SEEDS:
            raise SeedsError(f"--seeds: at most {MAX_SEEDS} seeds per evaluation")
        for s in range(a, b + 1):
            seeds[s] = None
    return list(seeds)


def parse_grid(texts: Iterable[str]) -> dict[str, list[ParamText]]:
    """``["agents=20,30", "layout=0,1"]`` -> ``{"agents": ["20", "30"], "layout": ["0", "1"]}`` (as typed;
    the loader reads each value by the parameter's declared type)."""
    grid: dict[str, list[ParamText]] = {}
    for text in texts:
        key, sep, values = text.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise SweepError(f"--grid expects NAME=V1,V2,... (for example --grid agents=20,50,100), got {text!r}")
        if key in grid:
            raise SweepError(f"--grid {key} is given twice; list all its values once: --grid {key}=V1,V2,...")
        grid[key] = [ParamText(v.strip()) for v in values.split(",")]
    return grid


def settings(params: Mapping[str, Any], grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every parameter setting: the fixed params with each combination of the grid's values."""
    both = sorted(set(params) & set(grid))
    if both:
        raise SweepError(f"parameter {both[0]!r} is both fixed (--param) and varied (--grid); give it once")
    empty = [k for k, v in grid.items() if not v]
    if empty:
        raise SweepError(f"--grid {empty[0]} has no values")
    keys = list(grid)
    return [{**params, **dict(zip(keys, combo, strict=True))}
            for combo in itertools.product(*(grid[k] for k in keys))]


def make_plan(scenarios: Sequence[str], seeds: Iterable[int], policy: str = "solution",
              params: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None,
              *, conflicts: bool = False) -> Plan:
    """Load each scenario once per setting to validate it (raises ScenarioError: unknown scenario, a
    parameter it does not declare, a value out of bounds) and fix the order of the report."""
    seed_list = list(dict.fromkeys(int(s) for s in seeds))
    if not seed_list:
        raise SeedsError("--seeds: no seeds to run")
    if any(s < 0 for s in seed_list):
        raise SeedsError("--seeds: seeds are integers >= 0")
    if not scenarios:
        raise SweepError("no scenario given")
    groups: list[Group] = []
    for scenario in scenarios:
        for setting in settings(dict(params or {}), dict(grid or {})):
            sc = load_scenario(scenario, setting)
            check_policy(sc, policy, seed_list[0])
            group = Group(scenario, sc.name, sc.params)
            if group not in groups:
                groups.append(group)
    return Plan(tuple(groups), tuple(seed_list), policy, conflicts)


def check_policy(sc: LoadedScenario, policy: str, seed: int) -> None:
    """Refuse a ``--policy`` that breaks the policy contract before any worker starts: a spec that does not
    resolve, a factory with the wrong signature or one whose product has no ``decide`` (PolicyError, a
    ScenarioError that teaches the contract). A factory that raises anything else is the policy's own
    failure: every seed's row says so (status ``crashed``)."""
    factory = as_factory(policy, sc, seed)
    try:
        instantiate(sc, seed, factory, record=False)
    except PolicyError:
        raise
    except Exception:  # noqa: BLE001 - reported per seed, as the run's error
        pass
