"""``warren verify RESULTS [--journals DIR]``: check cross-play results by replaying their journals.

Exit 0 when every journal replays identically, every score recomputes to the one claimed and every hash in
the manifest matches this machine's files; exit 1 naming each run that does not
(:mod:`warren_sim.evaluation.verify`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..evaluation.verify import VerifyError, verify
from ..replay import replay_journal
from ._common import EXIT_FAILED, EXIT_OK, UsageError, add_scenarios_option, apply_scenarios_option, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "verify", help="check cross-play results: replay every journal, recompute every score, "
                                      "check the manifest's hashes",
                  description="Verify the results of `warren eval SCENARIO --focal ... --journals DIR --json`: "
                              "exit 0 when every run holds, 1 naming each run that does not.")
    p.add_argument("results", type=Path, metavar="RESULTS", help="the results JSON (warren eval --focal ... --json)")
    p.add_argument("--journals", type=Path, default=None, metavar="DIR",
                   help="where the journals are (default: the directory the results name)")
    p.add_argument("--populations", type=Path, default=None, metavar="DIR",
                   help="where the held-out populations are now (default: where the results were made)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    add_scenarios_option(p)
    p.set_defaults(func=cmd_verify)


def read_results(path: Path) -> dict[str, Any]:
    """A results JSON file, or a UsageError that says what it is not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path} is not JSON ({exc}); expected the output of warren eval --focal ... --json") \
            from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object (warren eval --focal ... --json)")
    return data


def cmd_verify(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    results = read_results(args.results)
    try:
        verdict = verify(results, replay_journal, args.journals, populations=args.populations)
    except VerifyError as exc:
        raise UsageError(f"{args.results}: {exc}") from None
    if args.json:
        print(json.dumps({"ok": verdict.ok, "runs": verdict.runs, "failed_runs": verdict.failed_runs(),
                          "problems": [{"runs": list(p.runs), "what": p.what, "detail": p.detail}
                                       for p in verdict.problems]}, indent=2))
    elif verdict.ok:
        print(f"{args.results}: verified: {verdict.runs} run(s) replay identically, every score and hash holds")
    else:
        failed = verdict.failed_runs()
        print(f"{args.results}: NOT verified: {len(failed)} of {verdict.runs} run(s) differ")
        for p in verdict.problems:
            shown = ", ".join(p.runs[:5]) + (f" and {len(p.runs) - 5} more" if len(p.runs) > 5 else "")
            print(f"  {p.what}: {shown}: {p.detail}")
    return EXIT_OK if verdict.ok else EXIT_FAILED
