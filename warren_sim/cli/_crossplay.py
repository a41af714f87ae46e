"""``warren eval SCENARIO --focal ROLE=SPEC ...``: cross-play over partner populations (the table, ``--json``,
``--plot``); the work is :func:`warren_sim.evaluation.crossplay.crossplay`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from ..evaluation import SweepError, parse_seeds
from ..evaluation.crossplay import crossplay, render_crossplay
from ..runtime.clock import wall_seconds
from ..scenarios import ScenarioError
from ._common import EXIT_OK, UsageError


def cmd_crossplay(args: argparse.Namespace, params: dict[str, Any], callbacks: tuple[Any, Any]) -> int:
    if len(args.scenarios) != 1 or "," in args.scenarios[0]:
        raise UsageError("cross-play (--focal) takes one scenario")
    if args.grid or args.policy or args.conflicts or args.min_completion is not None:
        raise UsageError("--grid, --policy, --conflicts and --min-completion are not for cross-play: --focal "
                         "gives the focal policies, --partners the populations that play the other agents")
    on_row, progress = callbacks
    try:
        seeds = parse_seeds(args.seeds)
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the report's alone (see cli/eval.py)
            results = crossplay(args.scenarios[0], args.focal, args.partners, seeds, params,
                                populations=args.populations, journals=args.journals, jobs=args.jobs,
                                backend="ray" if args.ray else "local", address=args.address, out=args.out,
                                progress=on_row, clock=wall_seconds)
    except (ScenarioError, SweepError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        if progress is not None:
            progress.clear()
    print(json.dumps(results, indent=2) if args.json else render_crossplay(results))
    if args.plot is not None:
        from ..report.data import ReportError
        from ..report.plots import write_crossplay_plots

        try:
            written = write_crossplay_plots(results, args.plot)
        except ReportError as exc:
            raise UsageError(str(exc)) from None
        print("plots: " + ", ".join(str(p) for p in written), file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK
