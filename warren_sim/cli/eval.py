"""``warren eval``: a thin command line over :func:`warren_sim.evaluation.evaluate`.

Scenarios x parameter settings (``--param`` fixed, ``--grid`` varied) x seeds, on this machine's cores
(``--jobs N``) or on Ray (``--ray [--address ADDR]``), streaming rows to ``--out FILE.jsonl`` and resuming
from it. The report (table or ``--json``) is the same, apart from wall-clock fields, whatever the backend.
This module wires in the wall clock (:func:`warren_sim.runtime.clock.wall_seconds`) and draws the progress
line on stderr (on a terminal; elsewhere a plain line every few seconds, :mod:`warren_sim.progress`); everything else lives in :mod:`warren_sim.evaluation`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..evaluation import SweepError, default_jobs, evaluate, parse_grid, parse_seeds, render_table
from ..progress import Progress
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
    cli_params,
    policy_text,
    subparser,
)
from ._crossplay import cmd_crossplay


def register(sub: Any) -> None:
    p = subparser(sub, "eval", help="run scenarios over many seeds (and parameter grids), on local processes or "
                                    "Ray, and report completion, sim time, decisions and score",
                       description="Run each SCENARIO headless once per seed and parameter setting and report, "
                                   "per scenario and setting: completion rate, mean and p95 sim time, mean "
                                   "decisions and mean score.")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO",
                   help="scenario name(s) or directory(ies); several as 'a,b' or as separate arguments")
    p.add_argument("--seeds", default="0-99", help="seeds to run: '0-99', '7', or a list like '0-9,20,30-39' "
                                                   "(default 0-99)")
    p.add_argument("--policy", action="append", default=None, metavar="[ROLE=|AGENT=]SPEC",
                   help="solution, random, none, llm, population:NAME, file.py or module:factory (docs/policies.md; "
                        "default solution); repeatable: ROLE=SPEC or AGENT=SPEC for some agents")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="scenario parameter, fixed for the sweep (repeatable); every scenario given must declare it")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="scenario parameter to vary (repeatable): one report row per combination of values")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help=f"worker processes on this machine (default: its cores, {default_jobs()} here); "
                        "1 runs in this process")
    p.add_argument("--ray", action="store_true",
                   help="run seeds as Ray tasks (pip install 'warren-sim[ray]'): a local Ray, or the cluster at "
                        "--address or $RAY_ADDRESS")
    p.add_argument("--address", default=None, metavar="ADDR", help="with --ray: the Ray cluster to join "
                                                                    "(e.g. ray://head:10001 or auto)")
    p.add_argument("--out", default=None, metavar="FILE.jsonl",
                   help="append one JSON line per seed as it finishes; rerun with the same file to resume")
    p.add_argument("--conflicts", action="store_true",
                   help="record each run's journal and count same-batch conflicts (slower)")
    p.add_argument("--min-completion", type=float, default=None, metavar="RATE",
                   help="exit 1 when a scenario's completion rate is below RATE (0..1)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.add_argument("--plot", type=Path, default=None, metavar="DIR",
                   help="also plot completion rate and score over seeds and the sim-time distribution into DIR "
                        "(PNG and SVG; needs warren-sim[plot])")
    cross = p.add_argument_group("cross-play (docs/benchmarking.md)")
    cross.add_argument("--focal", action="append", default=[], metavar="ROLE=SPEC",
                       help="a focal policy for a role or an agent (repeatable: one row each); the others are "
                            "played by each --partners population")
    cross.add_argument("--partners", default="all", metavar="NAME[,NAME...]|all",
                       help="the populations to play with (columns): solution, the scenario's bundled ones, "
                            "--populations files; default all")
    cross.add_argument("--populations", default=None, metavar="DIR",
                       help="held-out populations: DIR/NAME.py files, each with factory(agent_id, role, briefing)")
    cross.add_argument("--journals", type=Path, default=None, metavar="DIR",
                       help="keep every run's journal as DIR/RUN.jsonl (warren verify replays them)")
    add_scenarios_option(p)
    add_llm_options(p)
    p.set_defaults(func=cmd_eval)


class ProgressLine:
    """``  120/400 seeds  38.1 seeds/s  ETA 7s`` on one terminal line, redrawn at most ten times a second.

    The rate counts seeds computed in this invocation from the first one to arrive, so neither the rows
    found in ``--out`` (done, but free) nor the workers' start-up inflate or deflate the ETA.
    """

    def __init__(self, stream: TextIO, clock: Any = wall_seconds, label: str = "") -> None:
        self.stream, self.clock, self.label = stream, clock, label
        self.first = 0  # rows found in --out
        self.first_row: tuple[int, float] | None = None  # (done, when) at the first computed row
        self.last_draw = -1.0
        self.errors = 0

    def rate(self, done: int, now: float) -> float | None:
        if self.first_row is None or done <= self.first_row[0] or now <= self.first_row[1]:
            return None
        return (done - self.first_row[0]) / (now - self.first_row[1])

    def text(self, done: int, total: int, now: float) -> str:
        rate = self.rate(done, now)
        parts = [f"{done}/{total} seeds"]
        if self.first:
            parts.append(f"({self.first} from --out)")
        parts.append(f"{rate:,.1f} seeds/s" if rate is not None else "- seeds/s")
        parts.append(f"ETA {_duration((total - done) / rate)}" if rate else "ETA -")
        if self.errors:
            parts.append(f"{self.errors} error(s)")
        return f"  {self.label}" + "  ".join(parts)

    def __call__(self, done: int, total: int, row: dict[str, Any] | None) -> None:
        if row is None:
            self.first = done
            return
        if row.get("error") is not None:
            self.errors += 1
        now = self.clock()
        if self.first_row is None:
            self.first_row = (done, now)
        if now - self.last_draw >= 0.1 or done == total:
            self.last_draw = now
            self.stream.write("\r" + self.text(done, total, now) + "   ")
            self.stream.flush()

    def clear(self) -> None:
        self.stream.write("\r" + " " * 79 + "\r")
        self.stream.flush()


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _footer(sweep: dict[str, Any], out: Any) -> str:
    """What the table's wall-sum is not: the sweep's own elapsed time, and how many rows were computed."""
    reused = sweep["runs"] - sweep["computed"]
    took = f"the sweep took {sweep['elapsed_s']:.2f}s" if sweep.get("elapsed_s") is not None else "the sweep ran"
    rows = f"{sweep['computed']} row(s) computed" + (f", {reused} reused from {out}" if out is not None else "")
    return f"  {took}: {rows}; wall-sum adds up every seed's run time, on every worker"


def progress_callback(args: argparse.Namespace) -> tuple[Any, ProgressLine | None]:
    """The sweep's progress callback: a live line on a terminal, elsewhere a plain line every few seconds
    (:mod:`warren_sim.progress`, seeds and decisions/s); and the live line, to clear at the end."""
    live = sys.stderr.isatty() and not args.quiet
    progress = ProgressLine(sys.stderr) if live else None
    plain = Progress("warren eval", interactive=False, enabled=not live and not args.quiet)
    decisions = [0]

    def on_row(done: int, total: int, row: dict[str, Any] | None) -> None:
        if row is None and args.out is not None and done:  # resuming: say what --out already holds
            print(f"warren eval: {done} of {total} rows are in {args.out} already; computing the other "
                  f"{total - done}", file=sys.stderr, flush=True)
        if progress is not None:
            progress(done, total, row)
        elif row is not None:
            decisions[0] += int(row.get("decisions") or 0)
            plain.update(decisions=decisions[0])
            plain.seed_done(done, total, row)

    return on_row, progress


def cmd_eval(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)  # $WARREN_SCENARIOS: worker processes and a local Ray see it too
    apply_llm_options(args)
    if args.min_completion is not None and not 0 <= args.min_completion <= 1:
        raise UsageError(f"--min-completion must be a rate between 0 and 1, got {args.min_completion}")
    if args.address is not None and not args.ray:
        raise UsageError("--address is for --ray (the Ray cluster to join); add --ray")
    if args.ray and args.jobs is not None:
        raise UsageError("--jobs is for local processes; with --ray, Ray decides (it uses every CPU it has)")
    params = cli_params(args.param)
    if args.focal:
        return cmd_crossplay(args, params, progress_callback(args))
    if args.journals is not None or args.populations is not None or args.partners != "all":
        raise UsageError("--partners, --populations and --journals are for cross-play: add --focal ROLE=SPEC")
    on_row, progress = progress_callback(args)
    # While the sweep runs, anything printed (a policy's prints, Ray's messages about its workers, which it
    # writes to stdout) goes to stderr: stdout is the report's alone, so `--json > report.json` stays JSON.
    try:
        seeds = parse_seeds(args.seeds)
        policy = policy_text(args.policy or ["solution"])
        with contextlib.redirect_stdout(sys.stderr):
            sweep = evaluate(args.scenarios, seeds, policy, params, parse_grid(args.grid), jobs=args.jobs,
                             backend="ray" if args.ray else "local", address=args.address, out=args.out,
                             conflicts=args.conflicts, progress=on_row, clock=wall_seconds)
    except (ScenarioError, SweepError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        if progress is not None:
            progress.clear()
    if args.json:
        print(json.dumps(sweep, indent=2))
    else:
        print(render_table(sweep, args.seeds))
        print(_footer(sweep, args.out))
    if args.plot is not None:
        from ..report.data import ReportError
        from ..report.plots import write_eval_plots

        try:
            written = write_eval_plots(sweep["results"], args.plot)
        except ReportError as exc:
            raise UsageError(str(exc)) from None
        print("plots: " + ", ".join(str(p) for p in written), file=sys.stderr if args.json else sys.stdout)
    if args.min_completion is not None and any(r["completion_rate"] < args.min_completion for r in sweep["results"]):
        return EXIT_FAILED
    return EXIT_OK
