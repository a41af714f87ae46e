"""``warren run``: a scenario headless, every agent driven by in-process policies.

No trio and no task per agent: the engine loop runs as fast as it goes. Progress
(:mod:`warren_sim.progress`) shows objectives, sim time and decisions/s live on a terminal and as a plain
line every few seconds elsewhere; ``--trace`` writes the run's journal, whose bytes depend only on the
scenario, the seed, the parameters and the policies (no wall-clock value is in it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..engine import Simulation, run_headless
from ..engine.records import TraceWriter
from ..progress import Progress
from ..runtime.clock import wall_seconds
from ..scenarios import ScenarioError, instantiate, load_scenario
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_llm_options,
    add_scenarios_option,
    apply_llm_options,
    apply_scenarios_option,
    cli_params,
    collector_paused,
    heap_frozen,
    open_trace,
    policy_text,
    print_headless_summary,
    subparser,
)


def register(sub: Any) -> None:
    p = subparser(sub, "run", help="run a scenario headless with its solution policies, as fast as it goes",
                  description="Run SCENARIO headless: every agent driven by an in-process policy, no server.")
    p.add_argument("scenario", help="a scenario name (warren scenarios lists them) or directory")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: same seed, same run")
    p.add_argument("--trace", type=Path, help="write the run's journal (JSON Lines) to this file")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="scenario parameter (repeatable)")
    p.add_argument("--policy", action="append", default=None, metavar="[ROLE=|AGENT=]SPEC",
                   help="solution, random, none, llm, population:NAME, file.py or module:factory (docs/policies.md); "
                        "repeatable: ROLE=SPEC or AGENT=SPEC for some agents (an agent's beats its role's, which "
                        "beats the plain SPEC; default solution)")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.add_argument("--snapshots", action="store_true",
                   help="with --trace T: also write engine snapshots every few batches to T.snapshots/, so that "
                        "warren fork T near the end of a long run starts from the last one instead of replaying "
                        "the whole run (docs/fork.md)")
    add_scenarios_option(p)
    add_llm_options(p)
    p.set_defaults(func=run_command)


SLOW_SETUP_S = 1.0  # a setup at least this long is reported in a log


def _objectives(sim: Simulation) -> list[tuple[str, int, int]]:
    return [(o["id"], o["progress"]["current"], o["progress"]["target"]) for o in sim.objective_views()]


def run_command(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    params = cli_params(args.param)
    apply_llm_options(args)
    began = wall_seconds()
    # Building a big world (the warren scenario at 100,000 foragers) takes seconds before the first batch:
    # say so at once, and erase it on a terminal once the run's own progress takes over.
    setting_up = f"warren run: setting up {args.scenario} seed {args.seed}" + (
        f" ({', '.join(args.param)})" if args.param else "") + "..."
    # On a terminal the line shows while the world is built and is erased after (an error stays one line);
    # in a log, where nothing can be erased, one line afterwards says how long a slow setup took.
    live = not args.quiet and sys.stderr.isatty()
    if live:
        print(setting_up, end="", file=sys.stderr, flush=True)

    def erase() -> None:
        if live:
            print("\r" + " " * len(setting_up) + "\r", end="", file=sys.stderr, flush=True)

    try:
        with collector_paused():
            loaded = load_scenario(args.scenario, params)
            sim, policies = instantiate(loaded, args.seed, args.policy or ["solution"],
                                        record=args.trace is not None)
    except ScenarioError as exc:
        erase()
        raise UsageError(str(exc)) from None
    if args.snapshots and args.trace is None:
        raise UsageError("--snapshots needs --trace T: the snapshots are written beside the trace, in T.snapshots/")
    out = open_trace(args.trace)
    snapshots = None
    if args.snapshots and out is not None:
        from ..journal_snapshots import SnapshotWriter

        try:
            snapshots = SnapshotWriter(args.trace, out, loaded, policy_text(args.policy or ["solution"]), sim)
        except ValueError as exc:
            out.close()
            raise UsageError(f"--snapshots: {exc}") from None
    writer = TraceWriter(snapshots.stream if snapshots is not None else out)
    started = wall_seconds()
    erase()
    if not args.quiet and not live and started - began >= SLOW_SETUP_S:
        print(f"{setting_up[:-3]}: set up in {started - began:.1f}s", file=sys.stderr, flush=True)
    progress = Progress(f"warren run {args.scenario} seed {args.seed}", enabled=not args.quiet)

    def on_batch(s: Simulation) -> None:
        writer.write(s.drain_records())
        if snapshots is not None:
            snapshots.after_batch(s, policies, writer.cursor)
        if progress.due():
            progress.update(sim_time_ms=s.time, decisions=s.decisions, objectives=_objectives(s))

    try:
        with progress, heap_frozen():
            summary = run_headless(sim, policies, on_batch=on_batch)
        writer.write(sim.drain_records())
        if snapshots is not None:
            snapshots.close()
    finally:
        if out is not None:
            out.close()
    ended = wall_seconds()
    wall, setup = ended - started, started - began
    print_headless_summary(summary, wall, name=args.scenario, policies=policies.values(), trace=args.trace,
                           records=writer.cursor,
                           after=[f"  setup {setup:.3f}s (loading the world, building its policies), "
                                  f"{setup + wall:.3f}s in all"])
    return EXIT_OK if summary["status"] == "completed" else EXIT_FAILED
