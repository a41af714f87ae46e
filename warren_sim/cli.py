"""``warren``: the composition root. The only module that wires layers together for users.

Subcommands: ``run`` (headless), ``scenarios``, ``serve``; each lives in its own ``cmd_*`` function
so that the argument parser stays the single description of the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line input; printed without a traceback, exit code 2."""


def parse_param(text: str) -> tuple[str, Any]:
    """``agents=1000`` -> ``("agents", 1000)``; values are JSON when they parse, else strings."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--param expects NAME=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def cmd_scenarios(args: argparse.Namespace) -> int:
    from .scenarios import ScenarioError, list_scenarios, load_scenario

    for name in list_scenarios():
        try:
            sc = load_scenario(name)
        except ScenarioError as exc:
            print(f"{name}: cannot load: {exc}")
            continue
        spec = sc.spec
        print(f"{name} — {spec.premise}")
        agents = ", ".join(f"{a.id} ({a.role})" for a in spec.agents[:8])
        more = f" and {len(spec.agents) - 8} more" if len(spec.agents) > 8 else ""
        print(f"    agents: {agents}{more}")
        if spec.params:
            print("    params: " + ", ".join(f"{p.name}={p.default!r}" for p in spec.params))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from .headless_cli import run_command

    return run_command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="warren", description="WARREN: a deterministic multi-agent simulator "
                                     "for testing agents, served over warren-agent/0.")
    parser.add_argument("--version", action="version", version=f"warren {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("scenarios", help="list scenarios with their premise and agents")
    p.set_defaults(func=cmd_scenarios)

    p = sub.add_parser("run", help="run a scenario headless with its solution policies, as fast as it goes")
    p.add_argument("scenario")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", type=Path, help="write the run's journal (JSON Lines) to this file")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="scenario parameter")
    p.add_argument("--policy", default="solution", help="solution, random, none or module:callable")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.set_defaults(func=cmd_run)

    register_more(sub)
    return parser


def cmd_bench(args: argparse.Namespace) -> int:
    """``warren bench ARGS`` = ``python -m bench ARGS`` from the repo root (bench/ is not installed)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / "bench" / "__main__.py").is_file():
        raise UsageError(f"no benchmarks at {root / 'bench'}; warren bench runs from a source checkout")
    return subprocess.call([sys.executable, "-m", "bench", *args.bench_args], cwd=root)


def register_more(sub: Any) -> None:
    """Subcommands of the server, client and evaluation layers (imported lazily when run)."""
    p = sub.add_parser("bench", help="run the benchmarks: python -m bench ARGS (see warren bench --help)",
                       add_help=False, prefix_chars="\0")  # no options of its own: every ARG goes to bench
    p.add_argument("bench_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    from .eval_cli import register as register_eval

    register_eval(sub)
    from .agent_cli import register as register_agent  # agent, demo, conformance

    register_agent(sub)
    from .replay import register as register_replay  # replay JOURNAL

    register_replay(sub)
    from .report_cli import register as register_report  # report JOURNAL

    register_report(sub)
    try:
        from .serve_cli import register as register_serve
    except ImportError:
        return
    register_serve(sub)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"warren {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run the importable module's main, not this __main__ copy, so exceptions raised by other
    # modules (warren_sim.cli.UsageError) are the ones main() catches.
    from warren_sim.cli import main as _main

    sys.exit(_main())
