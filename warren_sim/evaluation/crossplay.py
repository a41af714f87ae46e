"""Cross-play: focal policies x partner populations x seeds, one cell per (focal, population).

``warren eval SCENARIO --focal ROLE=SPEC --partners NAME,...|all``: every focal spec plays its role (or agent)
while a *population* plays every other agent (a policy file: the scenario's bundled ``populations/NAME.py``,
``solution``, or ``NAME.py`` from an organiser's held-out ``--populations DIR``). Each cell reports the
completion rate, the mean score and the mean sim time over the seeds, each with a 95% interval
(:mod:`warren_sim.evaluation.stats`). The focal keys' baselines (``KEY=none``, the floor, and
``KEY=solution``, the ceiling) are played too, so a results file carries what its leaderboard normalises
with (:mod:`warren_sim.evaluation.leaderboard`).

A cell's runs are ordinary sweep tasks (a team spec per task, :func:`warren_sim.scenarios.team_text`), so
they go to the same backends as ``warren eval`` and resume from the same ``--out`` file; the table is built in
plan order, the same whatever ran it. ``journals`` keeps every run's journal (``RUN.jsonl``) and the
results carry a :mod:`manifest <warren_sim.evaluation.manifest>` that ``warren verify`` checks.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..scenarios import LoadedScenario, ScenarioError, describe_population, load_scenario, population_files
from ..scenarios.policies import DEFAULT_KEY, PolicyError, team_text
from . import backends
from .manifest import make_manifest
from .plan import SweepError, check_policy
from .results import ResultFile, fill
from .runs import Clock, Task
from .stats import mean_interval, wilson_interval

KIND = "warren-crossplay"
FORMAT = 1
BASELINES = ("none", "solution")  # the floor and the ceiling a leaderboard normalises between


@attrs.frozen
class Focal:
    """``ROLE=SPEC`` or ``AGENT=SPEC``: who is focal (``key``) and what plays them (``spec``)."""

    key: str
    spec: str
    baseline: bool = False  # added for the leaderboard, not asked for

    @property
    def text(self) -> str:
        return f"{self.key}={self.spec}"


@attrs.frozen
class Population:
    name: str
    spec: str  # the policy spec of the population's agents
    description: str
    source: str  # "builtin", "bundled" or "held-out"
    path: str = ""  # its file ("" for solution)


def parse_focal(text: str, loaded: LoadedScenario) -> Focal:
    key, sep, spec = text.partition("=")
    key, spec = key.strip(), spec.strip()
    roles = [r.name for r in loaded.spec.roles]
    if not sep or not key or not spec or ":" in key:
        raise SweepError(f"--focal {text!r}: expected ROLE=SPEC or AGENT=SPEC (for example --focal "
                         f"{roles[0]}=mypolicy:factory); {loaded.name}'s roles: {', '.join(roles)}")
    if key not in roles and key not in {a.id for a in loaded.spec.agents}:
        ids = [a.id for a in loaded.spec.agents]
        raise SweepError(f"--focal {text}: {key!r} is neither a role nor an agent of {loaded.name}; its roles: "
                         f"{', '.join(roles)}; its agents: {', '.join(ids[:8])}"
                         + (f" and {len(ids) - 8} more" if len(ids) > 8 else ""))
    return Focal(key, spec)


def available_populations(loaded: LoadedScenario, held_out: str | os.PathLike[str] | None = None) -> list[Population]:
    """``solution``, then the bundled populations, then the held-out directory's ``NAME.py`` files."""
    out = [Population("solution", "solution", "the scenario's own solution.py plays every other agent", "builtin")]
    for name, path in population_files(loaded).items():
        out.append(Population(name, f"population:{name}", describe_population(path), "bundled", str(path)))
    if held_out is not None:
        folder = Path(held_out).expanduser()
        if not folder.is_dir():
            raise SweepError(f"--populations {held_out}: not a directory (it holds NAME.py files, each with a "
                             "factory(agent_id, role, briefing))")
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_"):
                continue
            if any(p.name == path.stem for p in out):
                raise SweepError(f"--populations {held_out}: {path.name} has the name of a population "
                                 f"{loaded.name} already has ({path.stem}); rename the file")
            out.append(Population(path.stem, str(path.resolve()), describe_population(path), "held-out",
                                  str(path.resolve())))
    return out


def choose_populations(available: Sequence[Population], partners: str) -> list[Population]:
    """``--partners all`` or ``NAME,NAME``: the columns, in the order given."""
    by_name = {p.name: p for p in available}
    if partners.strip() == "all":
        return list(available)
    chosen: list[Population] = []
    for name in (n.strip() for n in partners.split(",")):
        if not name:
            continue
        if name not in by_name:
            raise SweepError(f"--partners: no population {name!r}; available: {', '.join(by_name)} (or all)")
        if by_name[name] not in chosen:
            chosen.append(by_name[name])
    if not chosen:
        raise SweepError("--partners: name at least one population, or all")
    return chosen


def run_name(scenario: str, focal: Focal, population: str, seed: int) -> str:
    """A run's name, also its journal's file stem: readable, and unique per (focal spec, population, seed)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", focal.text)[:40]
    digest = hashlib.sha256(focal.text.encode()).hexdigest()[:6]
    return f"{scenario}.{slug}-{digest}.{population}.s{seed}"


def crossplay(scenario: str, focal: Sequence[str], partners: str = "all", seeds: Sequence[int] = range(10),
              params: Mapping[str, Any] | None = None, *, populations: str | os.PathLike[str] | None = None,
              journals: str | os.PathLike[str] | None = None, baselines: bool = True, jobs: int | None = None,
              backend: str = "local", address: str | None = None, out: str | os.PathLike[str] | None = None,
              progress: Any = None, clock: Clock | None = None) -> dict[str, Any]:
    """Play every focal spec with every chosen population over ``seeds`` and return the results (the table,
    each run's row, the manifest). Raises ScenarioError or SweepError before anything runs."""
    started = clock() if clock is not None else None
    seed_list = list(dict.fromkeys(int(s) for s in seeds))
    if not seed_list or any(s < 0 for s in seed_list):
        raise SweepError("--seeds: give one or more seeds >= 0")
    if backend not in ("local", "ray"):
        raise SweepError(f"backend {backend!r}: expected local or ray")
    if jobs is not None and jobs < 1:
        raise SweepError(f"--jobs must be at least 1, got {jobs}")
    sc = load_scenario(scenario, dict(params or {}))
    if not focal:
        raise SweepError("cross-play needs at least one --focal ROLE=SPEC")
    focals = [parse_focal(t, sc) for t in focal]
    if len({f.text for f in focals}) < len(focals):
        raise SweepError("--focal: a focal spec is given twice")
    if baselines:
        for key in dict.fromkeys(f.key for f in focals):
            for spec in BASELINES:
                if all(f.text != f"{key}={spec}" for f in focals):
                    focals.append(Focal(key, spec, baseline=True))
    columns = choose_populations(available_populations(sc, populations), partners)
    journal_dir = Path(journals) if journals is not None else None
    if journal_dir is not None:
        try:
            journal_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(f"--journals {journals}: cannot create it ({exc.strerror or exc})") from None
    cells: list[tuple[Focal, Population]] = [(f, p) for f in focals for p in columns]
    tasks: list[Task] = []
    for f, p in cells:
        team = team_text({DEFAULT_KEY: p.spec, f.key: f.spec})
        try:
            check_policy(sc, team, seed_list[0])
        except PolicyError as exc:
            raise ScenarioError(f"--focal {f.text} with population {p.name}: {exc}") from None
        for seed in seed_list:
            name = run_name(sc.name, f, p.name, seed)
            journal = str((journal_dir / f"{name}.jsonl").resolve()) if journal_dir is not None else ""
            tasks.append(Task(scenario, sc.params, seed, team, False, sc.name, journal, name))

    rows: list[dict[str, Any] | None] = [None] * len(tasks)
    store = ResultFile(out) if out is not None else None
    if store is not None:
        for i, task in enumerate(tasks):
            row = store.rows.get(task.key())
            if row is not None and (not task.journal or Path(task.journal).is_file()):
                rows[i] = row
    todo = fill(tasks, rows, store, progress,
                lambda pending, on_row: backends.run_tasks(pending, on_row, clock, backend=backend, jobs=jobs,
                                                           address=address))
    per_cell = len(seed_list)
    table = []
    for k, (f, p) in enumerate(cells):
        cell_rows = [r for r in rows[k * per_cell:(k + 1) * per_cell] if r is not None]
        table.append(cell(f, p, cell_rows, tasks[k * per_cell:(k + 1) * per_cell]))
    return {
        "kind": KIND, "format": FORMAT, "scenario": sc.name, "params": dict(sc.params), "seeds": seed_list,
        "focal": [f.text for f in focals if not f.baseline], "baselines": [f.text for f in focals if f.baseline],
        "populations": [attrs.asdict(p) for p in columns], "cells": table, "runs": len(tasks),
        "computed": len(todo), "journals": str(journal_dir.resolve()) if journal_dir is not None else None,
        "manifest": make_manifest(sc, focals, columns, seed_list),
        "elapsed_s": clock() - started if clock is not None and started is not None else None,
    }


def cell(focal: Focal, population: Population, rows: list[dict[str, Any]], tasks: Sequence[Task]) -> dict[str, Any]:
    """One (focal, population) cell: rates and means with 95% intervals, and every run's row."""
    completed = sum(1 for r in rows if r["status"] == "completed")
    scores = [float(r["score"]) for r in rows]
    times = [float(r["sim_time_ms"]) for r in rows]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    runs = [{"run": t.run_id, "seed": r["seed"], "status": r["status"], "reason": r["reason"], "score": r["score"],
             "sim_time_ms": r["sim_time_ms"], "decisions": r["decisions"],
             **({"error": r["error"]} if r.get("error") else {})}
            for t, r in zip(tasks, rows, strict=True)]
    return {
        "focal": focal.text, "baseline": focal.baseline, "population": population.name, "policy": tasks[0].policy,
        "runs": len(rows), "completed": completed,
        "completion_rate": completed / len(rows) if rows else 0.0,
        "completion_ci": list(wilson_interval(completed, len(rows))),
        "score": {"mean": mean_interval(scores)[0], "ci": list(mean_interval(scores)[1:])},
        "sim_time_ms": {"mean": mean_interval(times)[0], "ci": list(mean_interval(times)[1:])},
        "statuses": dict(sorted(statuses.items())), "per_seed": runs,
    }


def render_crossplay(results: dict[str, Any]) -> str:
    """The table: a row per focal spec (baselines marked), a column per population; each cell
    ``completion% [lo-hi] | score ± half-width | sim time``."""
    columns = [p["name"] for p in results["populations"]]
    by = {(c["focal"], c["population"]): c for c in results["cells"]}
    focals = [*results["focal"], *results["baselines"]]
    lines = [f"warren eval {results['scenario']}: cross-play, {len(results['seeds'])} seed(s), "
             f"{len(focals)} focal spec(s) x {len(columns)} population(s)", ""]
    header = ["focal", *columns]
    table = [header]
    for f in focals:
        label = f + (" (baseline)" if f in results["baselines"] else "")
        table.append([label, *(_cell_text(by[(f, c)]) for c in columns)])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for k, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += ["", "cell: completion rate [95% interval] | mean score ± 95% half-width | mean sim time"]
    for p in results["populations"]:
        lines.append(f"  {p['name']} ({p['source']}): {p['description']}")
    return "\n".join(lines)


def _cell_text(c: dict[str, Any]) -> str:
    lo, hi = c["completion_ci"]
    half = (c["score"]["ci"][1] - c["score"]["ci"][0]) / 2
    return (f"{100 * c['completion_rate']:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}] | {c['score']['mean']:.2f}"
            f"±{half:.2f} | {c['sim_time_ms']['mean'] / 1000:.0f}s")
