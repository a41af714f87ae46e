"""Drawing with matplotlib (Agg: no display, same output everywhere); optional extra ``warren-sim[plot]``.

Each ``*_figure`` function returns the Figure, so tests check the plotted data (the lines' points, the
bars' extents) rather than pixels; ``write_*`` save every figure as PNG and SVG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .data import ReportError, action_spans, eval_points, lanes_of, objective_series, run_record

MAX_TIMELINE_AGENTS = 40  # rows beyond this are unreadable; the title says how many were left out
TOOL_COLOURS = ["#2d6cdf", "#e4572e", "#2e8b57", "#9b59b6", "#f39c12", "#16a085", "#d35400", "#7f8c8d",
                "#c0392b", "#1abc9c"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ReportError("plots need matplotlib: pip install 'warren-sim[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _title(records: list[dict[str, Any]]) -> str:
    run = run_record(records)
    return f"{run['scenario']} seed {run['seed']} ({run['run_id']})"


def objectives_figure(records: list[dict[str, Any]]) -> Any:
    """Each objective's progress (current / target) over sim time, as steps."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for series in objective_series(records):
        xs = [t / 1000 for t, _ in series.points]
        ys = [v for _, v in series.points]
        ax.step(xs, ys, where="post", label=f"{series.id} ({series.status}, target {series.target})",
                linewidth=2, gid=f"objective:{series.id}")
        ax.axhline(series.target, linestyle=":", linewidth=1, color=ax.lines[-1].get_color())
    ax.set_xlabel("sim time (s)")
    ax.set_ylabel("progress")
    ax.set_title(f"Objectives — {_title(records)}")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def timeline_figure(records: list[dict[str, Any]]) -> Any:
    """Per agent and lane, a bar per action (colour by tool); rejected actions marked with a red x."""
    plt = _pyplot()
    spans = action_spans(records)
    agents_all = sorted({s.agent for s in spans} | set(run_record(records).get("agents", [])))
    agents = agents_all[:MAX_TIMELINE_AGENTS]
    rows = lanes_of(spans, agents)
    row_of = {row: i for i, row in enumerate(rows)}
    tools = sorted({s.tool for s in spans})
    colour = {tool: TOOL_COLOURS[i % len(TOOL_COLOURS)] for i, tool in enumerate(tools)}
    total = max((s.end for s in spans), default=0) / 1000 or 1.0
    instant = total / 300  # an instant action gets a visible sliver
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.42 * max(1, len(rows))))
    shown: set[str] = set()
    for s in spans:
        row = row_of.get((s.agent, s.lane))
        if row is None:
            continue
        if s.outcome == "rejected":
            ax.scatter([s.start / 1000], [row], marker="x", color="#c0392b", s=60, zorder=3, gid=f"rejected:{s.tool}",
                       label="rejected" if "rejected" not in shown else None)
            shown.add("rejected")
            continue
        width = (s.end - s.start) / 1000 or instant
        ax.barh(row, width, left=s.start / 1000, height=0.6, color=colour[s.tool],
                edgecolor="#222" if s.outcome == "interrupted" else "none", hatch="//" if s.outcome == "interrupted" else None,
                label=s.tool if s.tool not in shown else None, gid=f"action:{s.agent}:{s.lane}:{s.tool}")
        shown.add(s.tool)
    ax.set_yticks(range(len(rows)), [f"{a} · {lane}" for a, lane in rows])
    ax.invert_yaxis()
    ax.set_xlabel("sim time (s)")
    left_out = len(agents_all) - len(agents)
    ax.set_title(f"Actions by agent and lane — {_title(records)}"
                 + (f" (first {len(agents)} agents; {left_out} more not shown)" if left_out else ""))
    ax.grid(axis="x", alpha=0.3)
    if shown:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(1, len(rows))), ncol=min(8, len(shown)),
                  frameon=False)
    fig.tight_layout()
    return fig


def eval_figures(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """``completion``: completion rate (running) and score per seed; ``sim_time``: the sim-time distribution."""
    plt = _pyplot()
    fig1, (ax_rate, ax_score) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    fig2, ax_time = plt.subplots(figsize=(8, 4))
    for report in reports:
        pts = eval_points(report)
        name = report["scenario"]
        if sum(1 for r in reports if r["scenario"] == name) > 1:  # a --grid: one series per parameter setting
            name += " " + ",".join(f"{k}={v}" for k, v in sorted((report.get("params") or {}).items()))
        ax_rate.plot(pts["seed"], pts["completion_rate"], marker=".", label=name, gid=f"completion:{name}")
        ax_score.plot(pts["seed"], pts["score"], marker="o", linestyle="none", label=name, gid=f"score:{name}")
        ax_time.hist(pts["sim_time_s"], bins=min(30, max(1, len(pts["sim_time_s"]))), alpha=0.6, label=name,
                     gid=f"sim_time:{name}")
    ax_rate.set_ylabel("completion rate (running)")
    ax_rate.set_ylim(-0.05, 1.05)
    ax_score.set_ylabel("score")
    ax_score.set_xlabel("seed")
    ax_rate.set_title(f"Completion and score over seeds (policy {reports[0]['policy'] if reports else ''})")
    for ax in (ax_rate, ax_score, ax_time):
        ax.grid(alpha=0.3)
        ax.legend()
    ax_time.set_xlabel("sim time to the end (s)")
    ax_time.set_ylabel("runs")
    ax_time.set_title("Sim-time distribution")
    fig1.tight_layout()
    fig2.tight_layout()
    return {"eval_completion": fig1, "eval_sim_time": fig2}


def _save(figures: dict[str, Any], out: Path) -> list[Path]:
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures.items():
        for ext in ("png", "svg"):
            path = out / f"{name}.{ext}"
            fig.savefig(path, dpi=110, metadata={"Date": None} if ext == "svg" else None)
            written.append(path)
        plt.close(fig)
    return written


def write_report(records: list[dict[str, Any]], out: str | Path) -> list[Path]:
    """``objectives.{png,svg}`` and ``timeline.{png,svg}`` in ``out``; the paths written."""
    return _save({"objectives": objectives_figure(records), "timeline": timeline_figure(records)}, Path(out))


def write_eval_plots(reports: list[dict[str, Any]], out: str | Path) -> list[Path]:
    return _save(eval_figures(reports), Path(out))


def crossplay_figure(results: dict[str, Any], metric: str = "score") -> Any:
    """A heatmap of a cross-play: a row per focal spec, a column per population, ``metric`` (``score`` or
    ``completion_rate``) in each cell with its value written in."""
    plt = _pyplot()
    columns = [p["name"] for p in results["populations"]]
    rows = [*results["focal"], *results["baselines"]]
    by = {(c["focal"], c["population"]): c for c in results["cells"]}
    values = [[float(by[(f, p)]["score"]["mean"] if metric == "score" else by[(f, p)][metric]) for p in columns]
              for f in rows]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(columns), 1.2 + 0.5 * len(rows)))
    image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=max(1.0, *(v for row in values for v in row)),
                      aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [f + (" (baseline)" if f in results["baselines"] else "") for f in rows])
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if v < 0.6 else "black",
                    gid=f"cell:{rows[i]}:{columns[j]}")
    fig.colorbar(image, ax=ax, label=metric.replace("_", " "))
    ax.set_title(f"{results['scenario']}: cross-play {metric.replace('_', ' ')} ({len(results['seeds'])} seeds)")
    fig.tight_layout()
    return fig


def write_crossplay_plots(results: dict[str, Any], out: str | Path) -> list[Path]:
    """``crossplay_score`` and ``crossplay_completion`` heatmaps (PNG and SVG) in ``out``."""
    return _save({"crossplay_score": crossplay_figure(results, "score"),
                  "crossplay_completion": crossplay_figure(results, "completion_rate")}, Path(out))
