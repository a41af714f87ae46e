"""Evaluation: a policy over many seeds x scenarios x parameter settings, headless, on this process, local
worker processes or Ray (what ``warren eval`` prints).

:func:`evaluate` is the whole sweep (plan, resume from ``--out``, backend, report); :func:`render_table`
the text report. Uses only ``engine`` and ``scenarios`` (an import-linter contract): a worker needs neither
trio nor a server, gets a scenario by name, and the wall clock is handed in. :func:`crossplay` plays focal
policies against partner populations (:mod:`.crossplay`), :mod:`.verify` checks its results by replay and
:mod:`.leaderboard` ranks them (docs/benchmarking.md). The command line lives in
:mod:`warren_sim.cli.eval` and imports from here, never the other way round. See docs/evaluation.md.
"""

from .backends import default_jobs
from .crossplay import crossplay, render_crossplay
from .plan import MAX_SEEDS, SeedsError, SweepError, make_plan, parse_grid, parse_seeds
from .report import p95, render_table, without_wall
from .runs import WALL_FIELDS, Task, run_task, score_of, tokens_of
from .sweep import evaluate

__all__ = ["MAX_SEEDS", "WALL_FIELDS", "SeedsError", "SweepError", "Task", "crossplay", "default_jobs", "evaluate",
           "make_plan", "render_crossplay",
           "p95", "parse_grid", "parse_seeds", "render_table", "run_task", "score_of", "tokens_of", "without_wall"]
