"""Series to plot, read from journal records: objectives' progress over sim time, actions by agent and lane.

Pure functions over the records as the journal holds them (``docs/journal.md``): the ``run`` record's
``layout`` gives the objectives' targets and each tool's lane, ``objective`` records the progress,
``command``/``outcome``/``action`` records what each agent did and how it went.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ..engine.records import RecordsError, parse_records


class ReportError(ValueError):
    """The input cannot be plotted (not a journal, no run record); the message says why."""


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a journal file (JSON Lines); :class:`ReportError` with the line when one is not JSON."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"cannot read {path}: {exc}") from None
    try:
        return parse_records(text, str(path))
    except RecordsError as exc:
        raise ReportError(str(exc)) from None


def run_record(records: list[dict[str, Any]]) -> dict[str, Any]:
    run = next((r for r in records if r.get("kind") == "run"), None)
    if run is None or not isinstance(run.get("layout"), dict):
        raise ReportError("no 'run' record with a layout: is it a WARREN journal or `warren run --trace` file "
                          "(written by this version)?")
    return run


@attrs.frozen
class ObjectiveSeries:
    """One objective's progress as a step function: ``points`` are (sim ms, current), from t=0 to the end."""

    id: str
    description: str
    target: int
    status: str
    points: tuple[tuple[int, int], ...]


def end_time(records: list[dict[str, Any]]) -> int:
    return max((int(r["t"]) for r in records if isinstance(r.get("t"), int)), default=0)


def objective_series(records: list[dict[str, Any]]) -> list[ObjectiveSeries]:
    layout = run_record(records)["layout"]
    fields = {s["id"]: s["fields"] for s in layout["structures"]}
    out = []
    end = end_time(records)
    for o in layout["objectives"]:
        start = min(int(fields.get(o["structure"], {}).get(o["field"], 0)), int(o["target"]))
        points = [(0, start)]
        status = "completed" if start >= o["target"] else "pending"
        for r in records:
            if r.get("kind") == "objective" and r.get("id") == o["id"]:
                points.append((int(r["t"]), int(r["progress"]["current"])))
                status = str(r["status"])
        for r in records:
            if r.get("kind") == "end":
                status = next((str(v["status"]) for v in r.get("objectives", []) if v.get("id") == o["id"]), status)
        points.append((max(end, points[-1][0]), points[-1][1]))
        out.append(ObjectiveSeries(o["id"], o["description"], int(o["target"]), status, tuple(points)))
    return out


@attrs.frozen
class ActionSpan:
    """One action an agent took: on ``lane`` from ``start`` to ``end`` (sim ms); ``outcome`` is how it went.

    A rejected action has ``start == end`` (nothing happened; plotted as a mark). An instant action that was
    accepted also has ``start == end``; the plot gives it a visible width.
    """

    agent: str
    lane: str
    tool: str
    start: int
    end: int
    outcome: str  # completed, interrupted, accepted (instant), rejected, or pending (the run ended first)
    reason: str = ""


def action_spans(records: list[dict[str, Any]]) -> list[ActionSpan]:
    layout = run_record(records)["layout"]
    tools = {t["name"]: t for t in layout["tools"]}
    started: dict[str, tuple[str, str, int, bool]] = {}  # observation id -> agent, tool, start, durative
    spans: list[ActionSpan] = []
    end = end_time(records)
    for r in records:
        kind = r.get("kind")
        if kind == "command":
            cmd = r.get("command") or {}
            if isinstance(cmd, dict) and isinstance(cmd.get("action"), str) and cmd["action"] in tools:
                tool = tools[cmd["action"]]
                started[str(r["observation_id"])] = (str(r["agent"]), cmd["action"], int(r["t"]), bool(tool["durative"]))
        elif kind == "outcome":
            oid = str(r.get("observation_id"))
            if oid not in started:
                continue
            agent, tool, start, durative = started[oid]
            lane = tools[tool]["lane"]
            outcome = str(r["outcome"])
            if outcome == "rejected" or (outcome == "accepted" and not durative):
                spans.append(ActionSpan(agent, lane, tool, start, start, outcome, str(r.get("reason", ""))))
                del started[oid]
            elif outcome in ("completed", "interrupted"):
                spans.append(ActionSpan(agent, lane, tool, start, int(r["t"]), outcome, str(r.get("reason", ""))))
                del started[oid]
    for agent, tool, start, durative in started.values():  # accepted, still going when the run ended
        if durative:
            spans.append(ActionSpan(agent, tools[tool]["lane"], tool, start, end, "pending"))
    spans.sort(key=lambda s: (s.agent, s.lane, s.start, s.tool))
    return spans


def lanes_of(spans: list[ActionSpan], agents: list[str]) -> list[tuple[str, str]]:
    """The timeline's rows: (agent, lane) for every lane an agent used, agents in the given order."""
    used = {(s.agent, s.lane) for s in spans}
    return [(a, lane) for a in agents for lane in ("body", "voice") if (a, lane) in used]


def eval_points(report: dict[str, Any]) -> dict[str, list[float]]:
    """One evaluation report (``warren eval --json``'s ``results[i]``) as per-seed series, in seed order."""
    runs = sorted(report["per_seed"], key=lambda r: r["seed"])
    seeds = [float(r["seed"]) for r in runs]
    completed = [1.0 if r["status"] == "completed" else 0.0 for r in runs]
    rate, done = [], 0.0
    for i, c in enumerate(completed, 1):
        done += c
        rate.append(done / i)
    return {"seed": seeds, "completed": completed, "completion_rate": rate,
            "score": [float(r["score"]) for r in runs], "sim_time_s": [r["sim_time_ms"] / 1000 for r in runs]}
