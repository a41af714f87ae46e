"""``warren replay JOURNAL``: the command line of :mod:`warren_sim.replay` (identical, or where it diverged)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..replay import JournalError, read_journal, replay_records
from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_scenarios_option, apply_scenarios_option, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "replay", help="re-run a journal or trace from its recorded commands and check it is "
                       "identical")
    p.add_argument("journal", type=Path, help="a served run's journal (DATA_DIR/run-N.jsonl, GET "
                   "/v1/runs/{run}/journal) or a `warren run --trace` file")
    p.add_argument("--html", type=Path, metavar="OUT.html", help="also write the viewer with this journal "
                   "embedded: one self-contained file that opens from disk (attach it to a bug report)")
    add_scenarios_option(p)
    p.set_defaults(func=cmd_replay)


def _show(record: dict[str, Any] | None) -> str:
    return "(none)" if record is None else json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def cmd_replay(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    try:
        records = read_journal(args.journal)
        result = replay_records(records, str(args.journal))
        if args.html is not None:
            from ..runtime.rebuild import RebuildError
            from ..viewer_page import write_html

            try:
                size = write_html(records, str(args.html))
            except OSError as exc:
                print(f"warren replay: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
                return EXIT_USAGE
            except RebuildError as exc:
                print(f"warren replay: {exc}", file=sys.stderr)
                return EXIT_USAGE
            print(f"viewer: {args.html} ({size:,} bytes; open it in a browser, no server needed)")
    except JournalError as exc:
        print(f"warren replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    what = f"{result.scenario} seed {result.seed}, {result.run_id}" + (f", {result.status}" if result.status else "")
    if result.identical:
        print(f"identical ({result.records} records)")
        print(f"  {what}" + (f"; {result.note}" if result.note else ""))
        return EXIT_OK
    d = result.divergence
    assert d is not None
    where = f"cursor {d.cursor}" if d.cursor is not None else "the end of the journal"
    print(f"diverged at {where} (engine record {d.index + 1} of {result.records}): {what}")
    print(f"  expected (journal): {_show(d.expected)}")
    print(f"  got (replay):       {_show(d.got)}")
    differing = d.keys_differing()
    if differing:
        print(f"  differs in: {', '.join(differing)}")
    if d.detail:
        print(f"  {d.detail}")
    return EXIT_FAILED
