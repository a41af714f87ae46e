"""Evaluation of a policy over many seeds of one or more scenarios (what ``warren eval`` prints).

The library part of ``warren eval``: :func:`evaluate` runs a scenario headless once per seed and
aggregates completion, sim time, decisions, score and (optionally) conflicts; :func:`render_table` is
the text report. The command line lives in :mod:`warren_sim.cli.eval` and imports from here, never the
other way round.
"""

from .core import (
    MAX_SEEDS,
    SeedsError,
    evaluate,
    p95,
    parse_seeds,
    render_table,
    run_one,
    score_of,
)

__all__ = ["MAX_SEEDS", "SeedsError", "evaluate", "p95", "parse_seeds", "render_table", "run_one",
           "score_of"]
