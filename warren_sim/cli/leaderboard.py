"""``warren leaderboard RESULTS... [--md] [--html OUT]``: rank cross-play results
(:mod:`warren_sim.evaluation.leaderboard`: normalised between the ``none`` floor and the ``solution`` ceiling)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..evaluation.leaderboard import LeaderboardError, leaderboard, render_html, render_markdown, render_text
from ._common import EXIT_OK, UsageError, subparser
from .verify import read_results


def register(sub: Any) -> None:
    p = subparser(sub, "leaderboard", help="rank cross-play results: each cell normalised between the none floor "
                                           "and the solution ceiling, averaged",
                  description="Rank the focal specs of cross-play results (warren eval --focal ... --json), one "
                              "file per submission, by the mean over populations of their normalised score.")
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS", help="results JSON files (one per submission)")
    p.add_argument("--md", action="store_true", help="print Markdown tables")
    p.add_argument("--json", action="store_true", help="print the leaderboard as JSON")
    p.add_argument("--html", type=Path, default=None, metavar="OUT",
                   help="also write the leaderboard as one self-contained HTML file")
    p.set_defaults(func=cmd_leaderboard)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    if args.md and args.json:
        raise UsageError("--md or --json, not both")
    submissions = [(path.stem, read_results(path)) for path in args.results]
    names = [n for n, _ in submissions]
    if len(set(names)) < len(names):
        submissions = [(str(path), data) for path, (_, data) in zip(args.results, submissions, strict=True)]
    try:
        board = leaderboard(submissions)
    except LeaderboardError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(board, indent=2))
    elif args.md:
        print(render_markdown(board))
    else:
        print(render_text(board))
    if args.html is not None:
        try:
            args.html.write_text(render_html(board), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--html: cannot write {args.html}: {exc.strerror or exc}") from None
    return EXIT_OK
