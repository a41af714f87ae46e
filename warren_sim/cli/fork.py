"""``warren fork JOURNAL --cursor N``: a new headless run from a batch boundary of a journal (warren_sim.fork).

The same summary as ``warren run``, plus where it forked; ``--trace`` writes the fork's journal, which replays
on its own (``warren replay``) and whose ``run`` record names the parent and the fork point.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..engine import Simulation
from ..engine.records import TraceWriter
from ..fork import ForkError, fork_records, parse_override, run_fork
from ..journal_snapshots import fork_from_snapshots
from ..replay import JournalError, read_journal
from ..runtime.clock import wall_seconds
from ..scenarios import ScenarioError
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_llm_options,
    add_scenarios_option,
    apply_llm_options,
    apply_scenarios_option,
    collector_paused,
    heap_frozen,
    open_trace,
    policy_text,
    print_headless_summary,
    subparser,
)


def register(sub: Any) -> None:
    p = subparser(sub, "fork", help="continue a journal from one of its cursors, headless (what if?)",
                  description="Start a new headless run from the last batch boundary at or before --cursor of "
                              "JOURNAL (a served run's journal or a `warren run --trace` file), its policies "
                              "brought to that point (docs/fork.md).")
    p.add_argument("journal", type=Path, help="the parent run's journal or trace")
    p.add_argument("--cursor", type=int, required=True, metavar="N",
                   help="fork at the last batch boundary at or before this record's cursor")
    p.add_argument("--policy", action="append", default=None, metavar="[ROLE=|AGENT=]SPEC",
                   help="the policies that continue: solution, random, none, llm or module:factory "
                        "(docs/policies.md, 'Forks': how a policy is brought to the fork point); repeatable: "
                        "ROLE=SPEC or AGENT=SPEC for some agents (docs/benchmarking.md)")
    p.add_argument("--override", action="append", default=[], metavar="AGENT=COMMAND",
                   help="AGENT's answer to its first observation after the fork point, as JSON "
                        "(repeatable, once per agent), e.g. engineer-1='{\"noop\": true}'")
    p.add_argument("--trace", type=Path, help="write the fork's journal (JSON Lines) to this file")
    add_scenarios_option(p)
    add_llm_options(p)
    p.set_defaults(func=cmd_fork)


def cmd_fork(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    apply_llm_options(args)
    overrides: dict[str, dict[str, Any]] = {}
    if args.trace is not None and _same_file(args.trace, args.journal):
        raise UsageError(f"--trace {args.trace} is the journal being forked: the fork would overwrite its parent "
                         "while reading it; write the fork to another file")
    try:
        for text in args.override:
            agent, command = parse_override(text)
            if agent in overrides:
                raise ForkError(f"--override {agent} is given twice; one override per agent")
            overrides[agent] = command
        policy = policy_text(args.policy or ["solution"])
        # from the last snapshot before the cursor when `warren run --snapshots` wrote some (the same fork)
        with collector_paused():  # (the walk from a snapshot is shorter than the snapshots' interval)
            snapped = fork_from_snapshots(args.journal, args.cursor, policy, overrides, str(args.journal))
        if snapped is not None:
            forked, head_records = snapped.forked, snapped.head_records
        else:
            records = read_journal(args.journal)
            forked = fork_records(records, args.cursor, policy, overrides=overrides, where=str(args.journal))
            head_records = 0
    except (ForkError, JournalError, ScenarioError) as exc:
        raise UsageError(str(exc)) from None
    out = open_trace(args.trace)
    head_written: Callable[[], None] = _nothing
    if out is not None and snapped is not None:
        try:
            head_written = snapped.write_head(out)  # (copied beside the run: waited for before the file closes)
        except OSError as exc:
            out.close()
            raise UsageError(_cannot_copy(args, head_records, exc)) from None
    writer = TraceWriter(out)
    writer.cursor = head_records
    writer.write(forked.records)
    started = wall_seconds()

    def on_batch(s: Simulation) -> None:
        writer.write(s.drain_records())

    try:
        with heap_frozen():
            summary = run_fork(forked, on_batch=on_batch)
        writer.write(forked.sim.drain_records())
    finally:
        try:
            head_written()
        except OSError as exc:
            raise UsageError(_cannot_copy(args, head_records, exc)) from None
        finally:
            if out is not None:
                out.close()
    wall = wall_seconds() - started
    point = forked.point
    where = (f"  forked from {point.run_id} at cursor {point.cursor}: batch boundary {point.batch_cursor} "
             f"(after {point.batches} batches, t={point.t / 1000:.1f}s)"
             + (f"; overrides: {', '.join(sorted(overrides))}" if overrides else ""))
    print_headless_summary(summary, wall, wall_note=" after the fork point", between=[where],
                           policies=forked.policies.values(), trace=args.trace, records=writer.cursor)
    return EXIT_OK if summary["status"] == "completed" else EXIT_FAILED


def _nothing() -> None:
    """(No head to wait for: no ``--trace``, or a fork replayed from the start.)"""


def _cannot_copy(args: argparse.Namespace, head_records: int, exc: OSError) -> str:
    return (f"--trace: cannot copy {args.journal}'s first {head_records} records into {args.trace}: "
            f"{exc.strerror or exc}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False
