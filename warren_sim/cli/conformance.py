"""``warren conformance URL``: the command line of :mod:`warren_sim.conformance` (a report and an exit code)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, subparser


def register(sub: Any) -> None:
    p = subparser(sub, "conformance", help="check a warren-agent/0 server against the protocol, rule by rule",
                  description="Check the warren-agent/0 server at URL rule by rule with real requests; it "
                              "creates its own runs and cancels them at the end.")
    p.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--scenario", help="scenario to create runs of (default bridge_repair, else the first)")
    p.set_defaults(func=cmd_conformance)


def cmd_conformance(args: argparse.Namespace) -> int:
    import httpx
    import trio

    from ..conformance import format_report, run_conformance

    try:
        results = trio.run(lambda: run_conformance(args.url, scenario=args.scenario))
    except httpx.ConnectError as exc:
        print(f"warren conformance: cannot connect to {args.url} ({exc}); is a server running there? "
              "(warren serve --port N starts one)", file=sys.stderr)
        return EXIT_USAGE
    except (httpx.HTTPError, trio.TooSlowError) as exc:
        print(f"warren conformance: cannot check {args.url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(format_report(args.url, results))
    return EXIT_OK if all(r.passed is not False for r in results) else EXIT_FAILED
