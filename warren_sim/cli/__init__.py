"""``warren``: the composition root, and the only module that imports the subcommands.

Subcommands, one module each in this package:

- ``run``: one scenario headless with in-process policies, as fast as it goes (``--trace`` writes its journal)
- ``eval``: scenarios over many seeds headless, a table of completion, sim time, decisions and score
- ``scenarios``: list the scenarios found, with premise, agents and parameters
- ``serve``: serve warren-agent/0 (HTTP long-polling and the WebSocket binding) on Hypercorn
- ``agent``: drive one remote agent of a served run with a policy (``--create`` makes the run)
- ``mcp``: one remote agent as a stdio MCP server for an MCP host (``--create`` makes the run)
- ``demo``: a server, a run and a remote agent in one process, with a live transcript
- ``replay``: re-run a journal or trace and check the engine produces the same records (``--html``: the viewer
  with the journal embedded, one file)
- ``report``: plots of a run from its journal (objectives over sim time, actions by agent and lane)
- ``conformance``: check any warren-agent/0 server against the protocol, rule by rule
- ``bench``: the benchmarks of a source checkout (``python -m bench``)
- ``verify``: check cross-play results (``eval --focal ... --journals``): replay every journal, recompute scores
- ``leaderboard``: rank cross-play results between the ``none`` floor and the ``solution`` ceiling

Each module has ``register(subparsers)`` and the command functions; shared pieces live in
:mod:`warren_sim.cli._common`. Library code lives below (``scenarios``, ``evaluation``, ``replay``,
``conformance``, ``runtime``, ``http``, ``client``); nothing there imports this package (import-linter and
tests/test_layers.py check it).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__
from ._common import EXIT_USAGE, UsageError

__all__ = ["EXIT_USAGE", "UsageError", "build_parser", "main"]

# The subcommands' modules, by command name, in the order ``warren --help`` lists them.
SUBCOMMANDS = ("run", "eval", "fork", "scenarios", "serve", "agent", "mcp", "demo", "replay", "report",
               "conformance", "bench", "verify", "leaderboard")


class _Version(argparse.Action):
    """``warren --version``: the version, and the engine's build (importing the engine only when asked)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from ..engine import BUILD, WHY

        build = "compiled with mypyc" if BUILD == "mypyc" else "plain Python"
        print(f"warren {__version__} (engine: {build}{'; ' + WHY if WHY else ''})")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of ``command`` alone (the one whose arguments are parsed): then only
    its module is imported, not the thirteen others and what they import (a command starts 0.03-0.04 s sooner
    here: a twelfth of a fork of 10,000 foragers)."""
    parser = argparse.ArgumentParser(prog="warren", description="WARREN: a deterministic multi-agent simulator "
                                     "for testing agents, served over warren-agent/0.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and which build of the engine runs (compiled or plain Python)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [command] if command in SUBCOMMANDS else SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    # traces when the OTEL_* variables ask for them (warren serve's requests, warren agent's SDK and model calls);
    # without them nothing is imported (docs/operations.md)
    from ..observability.tracing import configure_from_env

    configure_from_env()
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"warren {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        stopped = _llm_stopped(exc)
        if stopped is None:
            raise
        print(f"warren {args.command}: --policy llm: {stopped}", file=sys.stderr)
        return EXIT_USAGE


def _llm_stopped(exc: BaseException) -> BaseException | None:
    """The LLM policy's configuration error that stopped a command mid-run (the model endpoint answered 404 for
    the model: its probe only warned), found inside exception groups too; None for anything else."""
    config = sys.modules.get("warren_sim.llm.config")
    if config is None:
        return None
    if isinstance(exc, BaseExceptionGroup):
        return next((found for e in exc.exceptions if (found := _llm_stopped(e)) is not None), None)
    return exc if isinstance(exc, config.LLMConfigError) else None
