"""``warren eval``: the command line of :mod:`warren_sim.evaluation` (a table or JSON, and an exit code)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..evaluation import SeedsError, evaluate, parse_seeds, render_table
from ..progress import Progress
from ..scenarios import ScenarioError
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_scenarios_option,
    apply_scenarios_option,
    cli_params,
    subparser,
)


def register(sub: Any) -> None:
    p = subparser(sub, "eval", help="run scenarios over many seeds and report completion, sim time, "
                                    "decisions and score",
                       description="Run each SCENARIO headless once per seed and report, per scenario: "
                                   "completion rate, mean and p95 sim time, mean decisions and mean score.")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario name(s) or directory(ies)")
    p.add_argument("--seeds", default="0-99", help="seeds to run: '0-99', '7', or a list like '0-9,20,30-39'")
    p.add_argument("--policy", default="solution", help="solution, random, none, llm or module:factory (docs/policies.md)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="scenario parameter (repeatable); every scenario given must declare it")
    p.add_argument("--conflicts", action="store_true",
                   help="record each run's journal and count same-batch conflicts (slower)")
    p.add_argument("--min-completion", type=float, default=None, metavar="RATE",
                   help="exit 1 when a scenario's completion rate is below RATE (0..1)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--plot", type=Path, default=None, metavar="DIR",
                   help="also plot completion rate and score over seeds and the sim-time distribution into DIR "
                        "(PNG and SVG; needs warren-sim[plot])")
    add_scenarios_option(p)
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    try:
        seeds = parse_seeds(args.seeds)
    except SeedsError as exc:
        raise UsageError(str(exc)) from None
    params = cli_params(args.param)
    if args.min_completion is not None and not 0 <= args.min_completion <= 1:
        raise UsageError(f"--min-completion must be a rate between 0 and 1, got {args.min_completion}")
    progress = Progress(f"warren eval ({len(seeds)} seeds x {len(args.scenarios)} scenarios)")
    done = [0]

    def on_seed(name: str, i: int, total: int) -> None:
        progress.update(label=name, seeds_done=done[0] + i, seeds_total=total * len(args.scenarios))

    reports = []
    with progress:
        for scenario in args.scenarios:
            try:
                reports.append(evaluate(scenario, seeds, args.policy, params, conflicts=args.conflicts,
                                        progress=on_seed))
            except ScenarioError as exc:
                raise UsageError(str(exc)) from None
            done[0] += len(seeds)
    if args.json:
        print(json.dumps({"seeds": seeds, "policy": args.policy, "results": reports}, indent=2))
    else:
        print(render_table(reports, args.seeds))
    if args.plot is not None:
        from ..report.data import ReportError
        from ..report.plots import write_eval_plots

        try:
            written = write_eval_plots(reports, args.plot)
        except ReportError as exc:
            raise UsageError(str(exc)) from None
        print("plots: " + ", ".join(str(p) for p in written), file=sys.stderr if args.json else sys.stdout)
    if args.min_completion is not None and any(r["completion_rate"] < args.min_completion for r in reports):
        return EXIT_FAILED
    return EXIT_OK
