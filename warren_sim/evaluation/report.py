"""The report of a sweep: per (scenario, parameter setting) aggregates of its rows, as JSON or a table.

For each group: the completion rate, the mean and 95th percentile of sim time, the mean number of
decisions, the mean score (the scenario's own ``score(summary, sim)`` when its solution defines one,
else the fraction of objectives completed), same-batch conflicts when counted, token usage when a
policy reports it, and why runs did not complete. Rows are aggregated in plan order (seed order), so
everything but the wall-clock fields (:data:`WALL_FIELDS`) is the same whichever backend ran them,
with however many workers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .plan import Group
from .runs import WALL_FIELDS


def p95(values: list[float]) -> float:
    """The 95th percentile by the nearest-rank method (a value that occurred)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def sum_tokens(items: Sequence[dict[str, Any]]) -> dict[str, int] | None:
    """``tokens`` summed over rows or reports that have it; None when none has."""
    with_tokens = [x["tokens"] for x in items if x.get("tokens") is not None]
    if not with_tokens:
        return None
    return {"prompt": sum(t["prompt"] for t in with_tokens), "completion": sum(t["completion"] for t in with_tokens)}


def aggregate(group: Group, policy: str, rows: list[dict[str, Any]], conflicts: bool) -> dict[str, Any]:
    """One group's report from its rows (in seed order)."""
    times = [r["sim_time_ms"] for r in rows]
    decisions = [r["decisions"] for r in rows]
    scores = [r["score"] for r in rows]
    walls = [r["wall_s"] for r in rows if r.get("wall_s") is not None]
    wall = sum(walls) if walls else None
    statuses = Counter(r["status"] for r in rows)
    reasons = Counter(f"{r['status']}: {r['reason']}" for r in rows if r["status"] != "completed")
    per_seed = [{k: v for k, v in r.items() if k not in ("scenario", "params", "policy")} for r in rows]
    report: dict[str, Any] = {
        "scenario": group.name,
        "params": dict(group.params),
        "policy": policy,
        "runs": len(rows),
        "completed": statuses.get("completed", 0),
        "completion_rate": statuses.get("completed", 0) / len(rows) if rows else 0.0,
        "statuses": dict(sorted(statuses.items())),
        "sim_time_ms": {"mean": _mean(times), "p95": p95(times), "min": min(times, default=0),
                        "max": max(times, default=0)},
        "decisions": {"mean": _mean(decisions), "total": sum(decisions)},
        "score": {"mean": _mean(scores), "min": min(scores, default=0.0), "max": max(scores, default=0.0)},
        "conflicts": None,
        "tokens": sum_tokens(rows),
        "errors": sum(1 for r in rows if r.get("error") is not None),
        "not_completed": [{"reason": k, "runs": v} for k, v in reasons.most_common()],
        "wall_s": wall,
        "decisions_per_s": sum(decisions) / wall if wall else None,
        "per_seed": per_seed,
    }
    if conflicts:
        per = [r["conflicts"] for r in rows]
        report["conflicts"] = {"mean": _mean(per), "runs_with_conflicts": sum(1 for c in per if c > 0),
                               "rejected_mean": _mean([r["rejected"] for r in rows])}
    return report


def without_wall(value: Any) -> Any:
    """``value`` without the fields in :data:`WALL_FIELDS`, at any depth: what no backend, number of workers
    or resume may change."""
    if isinstance(value, dict):
        return {k: without_wall(v) for k, v in value.items() if k not in WALL_FIELDS}
    if isinstance(value, list):
        return [without_wall(v) for v in value]
    return value


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f}s"


def _params_text(params: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items()) or "-"


def render_table(sweep: dict[str, Any], seeds_text: str) -> str:
    """The sweep as a fixed-width table (one row per scenario and setting) plus why runs did not complete."""
    reports = sweep["results"]
    policy = sweep["policy"]
    lines = [f"warren eval: {len(sweep['seeds'])} seed(s) ({seeds_text}), policy {policy}", ""]
    header = ["scenario", "params", "runs", "completed", "sim time mean", "p95", "decisions", "score"]
    with_conflicts = any(r["conflicts"] is not None for r in reports)
    with_tokens = any(r["tokens"] is not None for r in reports)
    if with_conflicts:
        header.append("conflicts")
    if with_tokens:
        header += ["tokens in", "tokens out"]
    header += ["wall-sum", "decisions/s"]  # the seeds' run times added up, not the sweep's elapsed time
    rows = [header]
    for r in reports:
        row = [r["scenario"], _params_text(r["params"]), str(r["runs"]), f"{100 * r['completion_rate']:.1f}%",
               _seconds(r["sim_time_ms"]["mean"]), _seconds(r["sim_time_ms"]["p95"]),
               f"{r['decisions']['mean']:.1f}", f"{r['score']['mean']:.3f}"]
        if with_conflicts:
            row.append(f"{r['conflicts']['mean']:.2f}" if r["conflicts"] is not None else "-")
        if with_tokens:
            tokens = r["tokens"]
            row += [f"{tokens['prompt']:,}", f"{tokens['completion']:,}"] if tokens is not None else ["-", "-"]
        rate = r["decisions_per_s"]
        row += [f"{r['wall_s']:.2f}s" if r["wall_s"] is not None else "-",
                f"{rate:,.0f}" if rate is not None else "-"]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for k, row in enumerate(rows):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    for r in reports:
        for item in r["not_completed"]:
            where = r["scenario"] + (f" ({_params_text(r['params'])})" if len(reports) > 1 and r["params"] else "")
            lines.append(f"  {where}: {item['runs']} run(s) {item['reason']}")
    if sweep.get("tokens") is not None:
        t = sweep["tokens"]
        lines.append(f"  tokens: {t['prompt']:,} prompt + {t['completion']:,} completion")
    return "\n".join(lines)
