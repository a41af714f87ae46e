"""Evaluation: run scenarios over many seeds headless and report how a policy does (``warren eval``).

For each scenario: the completion rate, the mean and 95th percentile of sim time, the mean number of
decisions, and the mean score. The score is the scenario's own number when its ``solution.py``
defines ``score(summary, sim) -> float`` (the warren counts seeds in its larder), otherwise the
fraction of objectives completed. ``--conflicts`` also records each run's journal and counts same-batch
conflicts: rejected outcomes whose record carries a ``conflict`` (a ``take`` that lost to another agent's
action earlier in the batch's order; see ``engine.rules.conflict``).

Everything but the wall-clock columns depends only on the scenario, parameters, seeds and policy, so
an evaluation is reproducible. The scenario is loaded once and its spec shared by every run.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from ..engine import Simulation, run_headless
from ..runtime.clock import wall_seconds
from ..scenarios import LoadedScenario, ScenarioError, instantiate, load_scenario

MAX_SEEDS = 1_000_000


class SeedsError(ValueError):
    """A ``--seeds`` text that is not a seed list; the message says what the form is."""


def parse_seeds(text: str) -> list[int]:
    """``'0-99'`` -> 0..99; ``'0-9,20,30-39'`` -> those; duplicates are kept once, in the order given."""
    seeds: dict[int, None] = {}
    for part in text.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        try:
            a = int(low)
            b = int(high) if sep else a
        except ValueError:
            raise SeedsError(f"--seeds: {part!r} is not a seed or a range; write '0-99', '7' or "
                             "'0-9,20,30-39' (seeds are integers >= 0)") from None
        if a < 0 or b < a:
            raise SeedsError(f"--seeds: {part!r} must be N or LOW-HIGH with 0 <= LOW <= HIGH")
        if len(seeds) + (b - a + 1) > MAX_SEEDS:
            raise SeedsError(f"--seeds: at most {MAX_SEEDS} seeds per evaluation")
        for s in range(a, b + 1):
            seeds[s] = None
    return list(seeds)


def p95(values: list[float]) -> float:
    """The 95th percentile by the nearest-rank method (a value that occurred)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def score_of(sc: LoadedScenario, summary: dict[str, Any], sim: Simulation) -> float:
    """The scenario's ``score(summary, sim)`` when it has one, else the fraction of objectives completed."""
    scorer = getattr(sc.solution, "score", None)
    if callable(scorer):
        return float(scorer(summary, sim))
    objectives = summary["objectives"]
    if not objectives:
        return 0.0
    return sum(1 for o in objectives if o["status"] == "completed") / len(objectives)


def run_one(sc: LoadedScenario, seed: int, policy: str, *, conflicts: bool = False) -> dict[str, Any]:
    """One headless run: its status, sim time, decisions, score (and conflicts when asked), plus wall time."""
    started = wall_seconds()
    counts: Counter[str] = Counter()

    def count(s: Simulation) -> None:
        for r in s.drain_records():
            if r["kind"] == "outcome" and r["outcome"] == "rejected":
                counts["rejected"] += 1
                if r.get("conflict") is not None:
                    counts["conflicts"] += 1

    sim, policies = instantiate(sc, seed, policy, record=conflicts, run_id=f"eval-{seed}")
    try:
        summary = run_headless(sim, policies, on_batch=count if conflicts else None)
    except Exception as exc:  # a policy that raises: report the run as crashed and go on
        sim.cancel(f"crashed: {type(exc).__name__}: {exc}")
        summary = {**sim.summary(), "status": "crashed"}
    if conflicts:
        count(sim)
    out = {"seed": seed, "status": summary["status"], "reason": summary["reason"],
           "sim_time_ms": summary["sim_time_ms"], "decisions": summary["decisions"],
           "score": score_of(sc, summary, sim) if summary["status"] != "crashed" else 0.0}
    if conflicts:
        out["conflicts"] = counts["conflicts"]
        out["rejected"] = counts["rejected"]
    out["wall_s"] = wall_seconds() - started
    return out


def evaluate(scenario: str, seeds: list[int], policy: str = "solution", params: dict[str, Any] | None = None,
             *, conflicts: bool = False, progress: Any = None) -> dict[str, Any]:
    """Run ``scenario`` once per seed and aggregate; raises ScenarioError for a bad scenario or params."""
    sc = load_scenario(scenario, params)
    if policy == "solution" and sc.solution is None:
        raise ScenarioError(f"scenario {sc.name} has no solution.py; use --policy random, none or module:callable")
    runs = []
    for i, seed in enumerate(seeds):
        if progress is not None:
            progress(sc.name, i, len(seeds))
        runs.append(run_one(sc, seed, policy, conflicts=conflicts))
    times = [r["sim_time_ms"] for r in runs]
    decisions = [r["decisions"] for r in runs]
    scores = [r["score"] for r in runs]
    wall = sum(r["wall_s"] for r in runs)
    statuses = Counter(r["status"] for r in runs)
    reasons = Counter(f"{r['status']}: {r['reason']}" for r in runs if r["status"] != "completed")
    report: dict[str, Any] = {
        "scenario": sc.name,
        "params": sc.params,
        "policy": policy,
        "runs": len(runs),
        "completed": statuses.get("completed", 0),
        "completion_rate": statuses.get("completed", 0) / len(runs) if runs else 0.0,
        "statuses": dict(sorted(statuses.items())),
        "sim_time_ms": {"mean": _mean(times), "p95": p95(times), "min": min(times, default=0),
                        "max": max(times, default=0)},
        "decisions": {"mean": _mean(decisions), "total": sum(decisions)},
        "score": {"mean": _mean(scores), "min": min(scores, default=0.0), "max": max(scores, default=0.0)},
        "conflicts": None,
        "not_completed": [{"reason": k, "runs": v} for k, v in reasons.most_common()],
        "wall_s": wall,
        "decisions_per_s": sum(decisions) / wall if wall > 0 else None,
        "per_seed": runs,
    }
    if conflicts:
        per = [r["conflicts"] for r in runs]
        report["conflicts"] = {"mean": _mean(per), "runs_with_conflicts": sum(1 for c in per if c > 0),
                               "rejected_mean": _mean([r["rejected"] for r in runs])}
    return report


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f}s"


def _params_text(params: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items()) or "-"


def render_table(reports: list[dict[str, Any]], seeds_text: str) -> str:
    """The evaluation as a fixed-width table (one row per scenario) plus the reasons runs did not complete."""
    policy = reports[0]["policy"] if reports else ""
    runs = reports[0]["runs"] if reports else 0
    lines = [f"warren eval: {runs} seed(s) ({seeds_text}), policy {policy}", ""]
    header = ["scenario", "params", "runs", "completed", "sim time mean", "p95", "decisions", "score"]
    with_conflicts = any(r["conflicts"] is not None for r in reports)
    if with_conflicts:
        header.append("conflicts")
    header += ["wall", "decisions/s"]
    rows = [header]
    for r in reports:
        row = [r["scenario"], _params_text(r["params"]), str(r["runs"]), f"{100 * r['completion_rate']:.1f}%",
               _seconds(r["sim_time_ms"]["mean"]), _seconds(r["sim_time_ms"]["p95"]),
               f"{r['decisions']['mean']:.1f}", f"{r['score']['mean']:.3f}"]
        if with_conflicts:
            row.append(f"{r['conflicts']['mean']:.2f}" if r["conflicts"] is not None else "-")
        rate = r["decisions_per_s"]
        row += [f"{r['wall_s']:.2f}s", f"{rate:,.0f}" if rate is not None else "-"]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for k, row in enumerate(rows):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    for r in reports:
        for item in r["not_completed"]:
            lines.append(f"  {r['scenario']}: {item['runs']} run(s) {item['reason']}")
    return "\n".join(lines)
