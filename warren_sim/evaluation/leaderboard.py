"""A leaderboard of cross-play results: each submission's focal spec ranked by one aggregate.

The aggregate (as Melting Pot normalises focal returns between baselines): for every population, the focal
spec's mean score is placed between the *floor*, the mean score of ``KEY=none`` with that population (the
focal agents do nothing), and the *ceiling*, that of ``KEY=solution`` (the scenario's own policy as focal):
``(score - floor) / (ceiling - floor)``, so 0 is "as good as doing nothing" and 1 "as good as the bundled
solution" (above 1 is better than it; values are not clipped). A population where the ceiling does not beat
the floor tells nothing about the focal agents and is left out (``None``). The aggregate is the mean over
the populations left; entries are ranked by it, highest first (ties by name). Cross-play results carry both
baselines for every focal key (:mod:`warren_sim.evaluation.crossplay`), so each file ranks on its own.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from .crossplay import KIND

AGGREGATE = ("mean over populations of (score - floor) / (ceiling - floor), floor = KEY=none, "
             "ceiling = KEY=solution with the same population")
EPSILON = 1e-9


class LeaderboardError(ValueError):
    """Results that cannot be ranked (not cross-play results, a baseline missing)."""


def _normalised(score: float, floor: float, ceiling: float) -> float | None:
    return (score - floor) / (ceiling - floor) if ceiling - floor > EPSILON else None


def leaderboard(submissions: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """``[(name, results), ...]`` -> ``{"aggregate", "boards": [one per scenario: populations, ranked entries]}``."""
    boards: dict[str, dict[str, Any]] = {}
    for name, results in submissions:
        if results.get("kind") != KIND:
            raise LeaderboardError(f"{name}: not cross-play results (warren eval SCENARIO --focal ... --json)")
        cells = {(c["focal"], c["population"]): c for c in results["cells"]}
        populations = [p["name"] for p in results["populations"]]
        board = boards.setdefault(results["scenario"], {"scenario": results["scenario"], "populations": [],
                                                        "entries": []})
        board["populations"] += [p for p in populations if p not in board["populations"]]
        for focal in results["focal"]:
            key = focal.partition("=")[0]
            row = []
            for pop in populations:
                floor, ceiling = cells.get((f"{key}=none", pop)), cells.get((f"{key}=solution", pop))
                if floor is None or ceiling is None:
                    raise LeaderboardError(f"{name}: no {key}=none or {key}=solution baseline with population "
                                           f"{pop} (cross-play adds them unless told not to)")
                cell = cells[(focal, pop)]
                score, low, high = cell["score"]["mean"], floor["score"]["mean"], ceiling["score"]["mean"]
                row.append({"population": pop, "score": score, "completion_rate": cell["completion_rate"],
                            "sim_time_ms": cell["sim_time_ms"]["mean"], "floor": low, "ceiling": high,
                            "normalised": _normalised(score, low, high)})
            defined = [c["normalised"] for c in row if c["normalised"] is not None]
            board["entries"].append({"submission": name, "focal": focal, "seeds": len(results["seeds"]),
                                     "aggregate": sum(defined) / len(defined) if defined else None, "cells": row})
    for board in boards.values():
        board["entries"].sort(key=lambda e: (e["aggregate"] is None, -(e["aggregate"] or 0.0), e["submission"],
                                             e["focal"]))
        for rank, entry in enumerate(board["entries"], 1):
            entry["rank"] = rank
    return {"aggregate": AGGREGATE, "boards": [boards[k] for k in sorted(boards)]}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _cell(board: dict[str, Any], entry: dict[str, Any], pop: str) -> dict[str, Any] | None:
    return next((c for c in entry["cells"] if c["population"] == pop), None)


def render_markdown(board_data: dict[str, Any]) -> str:
    """One Markdown table per scenario: rank, submission, focal, aggregate, then each population's
    normalised score (3 decimals; ``-`` where it is undefined)."""
    lines = [f"Aggregate: {board_data['aggregate']}.", ""]
    for board in board_data["boards"]:
        pops = board["populations"]
        lines += [f"### {board['scenario']}", "", "| rank | submission | focal | aggregate | " + " | ".join(pops) + " |",
                  "|---:|---|---|---:|" + "---:|" * len(pops)]
        for e in board["entries"]:
            cells = [_num(c["normalised"]) if (c := _cell(board, e, p)) is not None else "-" for p in pops]
            lines.append(f"| {e['rank']} | {e['submission']} | `{e['focal']}` | {_num(e['aggregate'])} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def render_text(board_data: dict[str, Any]) -> str:
    """The leaderboard as plain text (what ``warren leaderboard`` prints without ``--md`` or ``--json``)."""
    out = []
    for board in board_data["boards"]:
        pops = board["populations"]
        table = [["rank", "submission", "focal", "aggregate", *pops]]
        for e in board["entries"]:
            table.append([str(e["rank"]), e["submission"], e["focal"], _num(e["aggregate"]),
                          *(_num(c["normalised"]) if (c := _cell(board, e, p)) is not None else "-" for p in pops)])
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        out.append(f"{board['scenario']}:")
        for k, r in enumerate(table):
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
            if k == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
        out.append("")
    out.append(f"aggregate: {board_data['aggregate']}")
    return "\n".join(out)


_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
details{margin:.2em 0 .8em}summary{cursor:pointer;color:#035}code{font-size:13px}.agg{font-weight:bold}"""


def render_html(board_data: dict[str, Any]) -> str:
    """One self-contained HTML page (inline style, no script, nothing fetched): per scenario the ranked table,
    and under each entry its cross-play cells (score, floor, ceiling, completion, sim time)."""
    e_ = html.escape
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'><title>WARREN leaderboard</title>",
             f"<style>{_STYLE}</style></head><body><h1>WARREN leaderboard</h1>",
             f"<p>Aggregate: {e_(board_data['aggregate'])}.</p>"]
    for board in board_data["boards"]:
        pops = board["populations"]
        parts.append(f"<h2 id='{e_(board['scenario'])}'>{e_(board['scenario'])}</h2><table class='board'><tr>"
                     "<th>rank</th><th class='l'>submission</th><th class='l'>focal</th><th>aggregate</th>"
                     + "".join(f"<th>{e_(p)}</th>" for p in pops) + "</tr>")
        for e in board["entries"]:
            cells = "".join(f"<td>{_num(c['normalised']) if (c := _cell(board, e, p)) is not None else '-'}</td>"
                            for p in pops)
            parts.append(f"<tr class='entry'><td>{e['rank']}</td><td class='l'>{e_(e['submission'])}</td>"
                         f"<td class='l'><code>{e_(e['focal'])}</code></td><td class='agg'>{_num(e['aggregate'])}"
                         f"</td>{cells}</tr>")
        parts.append("</table>")
        for e in board["entries"]:
            parts.append(f"<details><summary>#{e['rank']} {e_(e['submission'])}: <code>{e_(e['focal'])}</code>, "
                         f"{e['seeds']} seed(s)</summary><table><tr><th class='l'>population</th><th>score</th>"
                         "<th>floor</th><th>ceiling</th><th>normalised</th><th>completion</th><th>sim time</th></tr>")
            for c in e["cells"]:
                parts.append(f"<tr><td class='l'>{e_(c['population'])}</td><td>{_num(c['score'])}</td>"
                             f"<td>{_num(c['floor'])}</td><td>{_num(c['ceiling'])}</td><td>{_num(c['normalised'])}"
                             f"</td><td>{100 * c['completion_rate']:.0f}%</td><td>{c['sim_time_ms'] / 1000:.1f} s"
                             "</td></tr>")
            parts.append("</table></details>")
    parts.append("</body></html>")
    return "\n".join(parts)
