"""``warren report JOURNAL [--out DIR]``: plots of one run from its journal (needs ``warren-sim[plot]``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import EXIT_OK, UsageError, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "report", help="plot a run from its journal: objectives over sim time, actions by agent "
                       "and lane (PNG and SVG; needs warren-sim[plot])")
    p.add_argument("journal", type=Path, help="a served run's journal or a `warren run --trace` file")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where to write the plots (default: JOURNAL's name without .jsonl, plus -report)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from ..report.data import ReportError, read_records
    from ..report.plots import write_report

    out = args.out or args.journal.with_name(args.journal.stem + "-report")
    try:
        written = write_report(read_records(args.journal), out)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    for path in written:
        print(path)
    return EXIT_OK
