"""``evaluate(...)``: a whole sweep (scenarios x settings x seeds) on a backend, resumable, one report.

The same function serves ``warren eval``, notebooks and Ray Tune trainables (docs/evaluation.md).
It validates the plan here first, then skips what ``out`` already holds, sends the rest to the
backend, appends each row to ``out`` as it arrives, and aggregates in plan order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import backends
from .plan import SweepError, make_plan, parse_seeds
from .report import aggregate, sum_tokens
from .results import ResultFile, fill
from .runs import Clock

#: ``progress(done, total, row)`` after each row (``row`` None once at the start, with what ``out`` held).
Progress = Callable[[int, int, dict[str, Any] | None], None]
BACKENDS = ("local", "ray")


def evaluate(scenarios: str | Sequence[str], seeds: str | Iterable[int] = "0-99", policy: str = "solution",
             params: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None, *,
             jobs: int | None = None, backend: str = "local", address: str | None = None,
             out: str | os.PathLike[str] | None = None, conflicts: bool = False,
             progress: Progress | None = None, clock: Clock | None = None) -> dict[str, Any]:
    """Run every scenario (a name, a directory, or a list; ``"a,b"`` works too) with every setting of
    ``params`` + ``grid`` over ``seeds`` and return the report:
    ``{"seeds", "policy", "grid", "results": [one per scenario and setting], "tokens", "runs", "computed",
    "elapsed_s"}``.

    ``backend="local"`` runs ``jobs`` worker processes (default: the machine's cores; ``jobs=1`` runs in
    this process); ``backend="ray"`` runs Ray tasks on the session already started, else
    ``ray.init(address=address)``. ``out`` is a JSON Lines file of rows to resume from and append to.
    ``clock`` (a function returning seconds) times runs; without it the wall-clock fields are None.

    Raises ScenarioError (a bad scenario, parameter or policy) or SweepError (bad seeds, grid, backend,
    ``out``) before anything runs.
    """
    started = clock() if clock is not None else None
    names = [scenarios] if isinstance(scenarios, str) else list(scenarios)
    names = [n.strip() for text in names for n in text.split(",") if n.strip()]
    seed_list = parse_seeds(seeds) if isinstance(seeds, str) else list(seeds)
    if backend not in BACKENDS:
        raise SweepError(f"backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if jobs is not None and jobs < 1:
        raise SweepError(f"--jobs must be at least 1, got {jobs}")
    plan = make_plan(names, seed_list, policy, params, grid, conflicts=conflicts)
    tasks = plan.tasks()
    rows: list[dict[str, Any] | None] = [None] * len(tasks)
    store = ResultFile(out) if out is not None else None
    if store is not None:
        for i, task in enumerate(tasks):
            rows[i] = store.rows.get(task.key())
    todo = fill(tasks, rows, store, progress,
                lambda pending, on_row: backends.run_tasks(pending, on_row, clock, backend=backend, jobs=jobs,
                                                           address=address))
    assert all(r is not None for r in rows), "every task has a row"
    per_group = len(plan.seeds)
    results = [aggregate(group, plan.policy, [r for r in rows[k * per_group:(k + 1) * per_group] if r is not None],
                         conflicts)
               for k, group in enumerate(plan.groups)]
    return {"seeds": list(plan.seeds), "policy": plan.policy,
            "grid": {k: [str(v) for v in vs] for k, vs in (grid or {}).items()},
            "results": results, "tokens": sum_tokens(results), "runs": len(tasks), "computed": len(todo),
            "elapsed_s": clock() - started if clock is not None and started is not None else None}
