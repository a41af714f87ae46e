"""One unit of a sweep: a (scenario, params, seed, policy) task, and the row a worker returns for it.

A task is all a worker gets: names and numbers, never a loaded scenario or a simulation, so it crosses a
process boundary or a Ray cluster as a few bytes and the worker loads the scenario by name itself (once per
worker and parameter set: :func:`loaded`). The row is everything the report needs about that seed; it is
also the line ``--out FILE.jsonl`` stores, so it carries its own key.

Nothing that escapes a run loses the sweep: a policy that raises in ``decide`` or in its factory, or a
scorer that raises, gives a row with status ``crashed`` and the exception in ``error``. Only the parent
writes ``error`` rows (a worker process that died, a Ray task lost with its node); see
:mod:`warren_sim.evaluation.backends`.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..engine import Simulation, run_headless
from ..engine.records import TraceWriter
from ..scenarios import LoadedScenario, instantiate, load_scenario
from ..scenarios.loader import find_scenario

#: A wall-clock reading in seconds, handed in by the caller (the CLI passes ``runtime.clock.wall_seconds``);
#: ``None`` leaves the wall-clock fields empty. Evaluation itself never reads a clock.
Clock = Callable[[], float]

#: Report fields that depend on the machine, the moment or this invocation (``computed``: how many rows
#: were not already in ``--out``), not on (scenario, params, seeds, policy): all a backend may change.
WALL_FIELDS = frozenset({"wall_s", "decisions_per_s", "seeds_per_s", "elapsed_s", "computed"})


@attrs.frozen
class Task:
    """What a worker needs to run one seed: the scenario by name (or directory), its validated parameters,
    the seed, the ``--policy`` spec, and whether to count conflicts from the journal."""

    scenario: str
    params: Mapping[str, Any]
    seed: int
    policy: str = "solution"
    conflicts: bool = False
    name: str = ""  # the scenario's own name (its directory's), as reports and keys show it
    journal: str = ""  # a file to write the run's journal to (cross-play's --journals); "" records none
    run_id: str = ""  # the journal's run id ("" is eval-SEED)

    def key(self) -> str:
        return row_key(self.name or self.scenario, self.params, self.policy, self.conflicts, self.seed)


def row_key(scenario: str, params: Mapping[str, Any], policy: str, conflicts: bool, seed: int) -> str:
    """The identity of a row in ``--out``: what it was computed from, in a canonical JSON text."""
    return json.dumps([scenario, dict(params), policy, bool(conflicts), seed], sort_keys=True)


def key_of(row: Mapping[str, Any]) -> str:
    return row_key(row["scenario"], row["params"], row["policy"], row.get("conflicts") is not None, row["seed"])


@functools.lru_cache(maxsize=32)
def _loaded(directory: str, stamp: tuple[tuple[int, int] | None, ...], params_json: str) -> LoadedScenario:
    return load_scenario(directory, json.loads(params_json))


def loaded(scenario: str, params: Mapping[str, Any]) -> LoadedScenario:
    """The scenario loaded once per worker and parameter set; its spec is shared by every run, never changed.

    Cached by where the scenario is found and its files' sizes and modification times, so a long-lived
    worker (a notebook's process, a Ray worker) loads an edited scenario again instead of running a stale one.
    """
    directory = find_scenario(scenario)
    stamp = tuple((st.st_mtime_ns, st.st_size) if (st := _stat(directory / f)) is not None else None
                  for f in SCENARIO_FILES)
    return _loaded(str(directory), stamp, json.dumps(dict(params), sort_keys=True))


SCENARIO_FILES = ("scenario.toml", "solution.py", "expand.py")


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def score_of(sc: LoadedScenario, summary: dict[str, Any], sim: Simulation) -> float:
    """The scenario's ``score(summary, sim)`` when it has one, else the fraction of objectives completed."""
    scorer = getattr(sc.solution, "score", None)
    if callable(scorer):
        return float(scorer(summary, sim))
    objectives = summary["objectives"]
    if not objectives:
        return 0.0
    return sum(1 for o in objectives if o["status"] == "completed") / len(objectives)


def tokens_of(policies: Iterable[Any]) -> dict[str, int] | None:
    """Token usage summed over a run's policies, or None when no policy reports any.

    The convention (docs/evaluation.md): a policy may expose ``usage``, a dict with cumulative
    ``prompt_tokens`` and ``completion_tokens`` (the OpenAI names); one LLM policy object per agent.
    """
    prompt = completion = 0
    seen = False
    for policy in policies:
        usage = getattr(policy, "usage", None)
        if isinstance(usage, Mapping):
            seen = True
            prompt += int(usage.get("prompt_tokens", 0) or 0)
            completion += int(usage.get("completion_tokens", 0) or 0)
    return {"prompt": prompt, "completion": completion} if seen else None


def _base(task: Task) -> dict[str, Any]:
    return {"scenario": task.name or task.scenario, "params": dict(task.params), "policy": task.policy,
            "seed": task.seed}


def error_row(task: Task, error: str) -> dict[str, Any]:
    """The row of a seed whose worker could not return one (the process died, the node was lost)."""
    row = {**_base(task), "status": "error", "reason": error, "sim_time_ms": 0, "decisions": 0, "score": 0.0,
           "error": error}
    if task.conflicts:
        row["conflicts"] = row["rejected"] = 0
    row["wall_s"] = None
    return row


def run_task(task: Task, clock: Clock | None = None) -> dict[str, Any]:
    """Run one seed headless and return its row: status, reason, sim time, decisions, score, conflicts when
    asked, tokens when a policy reports usage, the error of a crashed run, and its wall time."""
    started = clock() if clock is not None else None
    counts: Counter[str] = Counter()
    policies: dict[str, Any] = {}
    error: str | None = None

    def count(s: Simulation) -> None:
        count_records(s.drain_records())

    def count_records(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["kind"] == "outcome" and r["outcome"] == "rejected":
                counts["rejected"] += 1
                if r.get("conflict") is not None:  # a same-batch loss (a tool entry's conflict, engine/rules.py)
                    counts["conflicts"] += 1

    sim: Simulation | None = None
    summary: dict[str, Any]
    score = 0.0
    try:
        sc = loaded(task.scenario, task.params)
        sim, policies = instantiate(sc, task.seed, task.policy, record=task.conflicts or bool(task.journal),
                                    run_id=task.run_id or f"eval-{task.seed}")
        if task.journal:
            with open(task.journal, "w", encoding="utf-8") as out:
                writer = TraceWriter(out)

                def keep(s: Simulation) -> None:
                    records = s.drain_records()
                    writer.write(records)
                    if task.conflicts:
                        count_records(records)

                summary = run_headless(sim, policies, on_batch=keep)
                keep(sim)
        else:
            summary = run_headless(sim, policies, on_batch=count if task.conflicts else None)
            if task.conflicts:
                count(sim)
        score = score_of(sc, summary, sim)
    except Exception as exc:  # a policy (or its factory, or a scorer) that raises: a crashed row, the sweep goes on
        error = f"{type(exc).__name__}: {exc}"
        if sim is not None:
            sim.cancel(f"crashed: {error}")
            summary = {**sim.summary(), "status": "crashed"}
        else:
            summary = {"status": "crashed", "reason": f"crashed: {error}", "sim_time_ms": 0, "decisions": 0}
        score = 0.0
    row = {**_base(task), "status": summary["status"], "reason": summary["reason"],
           "sim_time_ms": summary["sim_time_ms"], "decisions": summary["decisions"], "score": score}
    if task.conflicts:
        row["conflicts"] = counts["conflicts"]
        row["rejected"] = counts["rejected"]
    tokens = tokens_of(policies.values())
    if tokens is not None:
        row["tokens"] = tokens
    if error is not None:
        row["error"] = error
    row["wall_s"] = clock() - started if clock is not None and started is not None else None
    return row


def run_batch(tasks: list[Task], clock: Clock | None = None) -> list[dict[str, Any]]:
    """Several seeds in one worker call (fewer round trips when a seed takes milliseconds)."""
    return [run_task(t, clock) for t in tasks]
