"""Evaluation: many seeds x scenarios x parameter settings, headless, on local processes or Ray.

Uses only ``engine`` and ``scenarios`` (an import-linter contract): a worker needs neither trio nor a
server, and gets a scenario by name. See docs/evaluation.md.
"""

from .backends import default_jobs
from .plan import SweepError, make_plan, parse_grid, parse_seeds
from .report import p95, render_table, without_wall
from .runs import WALL_FIELDS, Task, run_task, score_of, tokens_of
from .sweep import evaluate

__all__ = ["WALL_FIELDS", "SweepError", "Task", "default_jobs", "evaluate", "make_plan", "p95", "parse_grid",
           "parse_seeds", "render_table", "run_task", "score_of", "tokens_of", "without_wall"]
