"""``warren run``: a scenario headless, every agent driven by in-process policies.

No trio and no task per agent: the engine loop runs as fast as it goes. On a terminal a live line
shows sim time and objectives; ``--trace`` writes the run's journal, whose bytes depend only on the
scenario, the seed, the parameters and the policies (no wall-clock value is in it).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .engine import Simulation, briefing, run_headless
from .engine.records import dumps_record, with_cursor
from .progress import Progress
from .runtime.clock import wall_seconds
from .scenarios import LoadedScenario, ParamText, ScenarioError, load_scenario


class TraceWriter:
    """Appends the simulation's records to a JSON Lines file, numbering them with cursors."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.cursor = 0

    def write(self, records: list[dict[str, Any]]) -> None:
        if self.stream is None:
            self.cursor += len(records)
            return
        lines = []
        for record in records:
            lines.append(dumps_record(with_cursor(self.cursor, record)))
            self.cursor += 1
        if lines:
            self.stream.write("\n".join(lines) + "\n")


def build_run(scenario: str, seed: int, params: dict[str, Any], policy: str, *, record: bool = True,
              run_id: str = "headless") -> tuple[Simulation, dict[str, Any]]:
    return start_run(load_scenario(scenario, params), seed, policy, record=record, run_id=run_id)


def start_run(sc: LoadedScenario, seed: int, policy: str, *, record: bool = True,
              run_id: str = "headless") -> tuple[Simulation, dict[str, Any]]:
    """A simulation of an already loaded scenario (its spec is shared, never changed) and its policies."""
    sim = Simulation(sc.spec, seed, run_id=run_id, params=sc.params, record=record)
    policies = {a.id: sc.make_policy(policy, a.id, a.role, briefing(sim, a.id), seed) for a in sc.spec.agents}
    return sim, policies


def cli_params(texts: list[str]) -> dict[str, ParamText]:
    """``["agents=1000"]`` -> ``{"agents": ParamText("1000")}``; the loader reads each by its declared type."""
    from .cli import UsageError

    out: dict[str, ParamText] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param expects NAME=VALUE (for example --param agents=1000), got {text!r}")
        out[key.strip()] = ParamText(value)
    return out


def _objectives(sim: Simulation) -> list[tuple[str, int, int]]:
    return [(o["id"], o["progress"]["current"], o["progress"]["target"]) for o in sim.objective_views()]


def run_command(args: argparse.Namespace) -> int:
    from .cli import UsageError

    params = cli_params(args.param)
    try:
        sim, policies = build_run(args.scenario, args.seed, params, args.policy, record=args.trace is not None)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    out = open(args.trace, "w", encoding="utf-8") if args.trace else None  # noqa: SIM115
    writer = TraceWriter(out)
    started = wall_seconds()
    progress = Progress(f"warren run {args.scenario} seed {args.seed}", enabled=not args.quiet)

    def on_batch(s: Simulation) -> None:
        writer.write(s.drain_records())
        if progress.due():
            progress.update(sim_time_ms=s.time, decisions=s.decisions, objectives=_objectives(s))

    try:
        with progress:
            summary = run_headless(sim, policies, on_batch=on_batch)
        writer.write(sim.drain_records())
    finally:
        if out is not None:
            out.close()
    wall = wall_seconds() - started
    rate = summary["decisions"] / wall if wall > 0 else float("inf")
    print(f"{args.scenario} seed {args.seed}: {summary['status']} ({summary['reason']})")
    for o in summary["objectives"]:
        p = o["progress"]
        print(f"  objective {o['id']:<12} {o['status']:<10} {p['current']}/{p['target']}  {o['description']}")
    print(f"  sim time {summary['sim_time_ms'] / 1000:.1f}s, {summary['decisions']} decisions, "
          f"wall {wall:.3f}s, {rate:,.0f} decisions/s")
    if args.trace:
        print(f"  trace: {args.trace} ({writer.cursor} records)")
    return 0 if summary["status"] == "completed" else 1
