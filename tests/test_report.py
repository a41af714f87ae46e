"""`warren report` and `warren eval --plot`: the files are written and the figures plot the journal's data."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from warren_sim.cli import main
from warren_sim.report.data import action_spans, objective_series, read_records
from warren_sim.report.plots import eval_figures, objectives_figure, timeline_figure

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def seed3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("report") / "seed3.jsonl"
    assert main(["run", "bridge_repair", "--seed", "3", "--trace", str(trace), "--quiet"]) == 0
    return trace


def test_report_writes_both_plots_as_png_and_svg(seed3, tmp_path, capsys):
    """`warren report JOURNAL --out DIR`: objectives and timeline, each as a PNG and a well-formed SVG."""
    assert main(["report", str(seed3), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.split()
    names = sorted(Path(p).name for p in printed)
    assert names == ["objectives.png", "objectives.svg", "timeline.png", "timeline.svg"]
    for name in names:
        path = tmp_path / "out" / name
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert ET.parse(path).getroot().tag.endswith("svg")


def test_objectives_plot_is_the_journals_objective_records(seed3):
    """Each line steps through exactly the journal's objective records: repair to 2/2, resupply to 3/3."""
    records = read_records(seed3)
    fig = objectives_figure(records)
    lines = {line.get_gid(): line for line in fig.axes[0].lines if line.get_gid()}
    assert set(lines) == {"objective:repair", "objective:resupply"}
    end = records[-1]["t"] / 1000
    for oid, target in (("repair", 2), ("resupply", 3)):
        want = [(0.0, 0.0)] + [(r["t"] / 1000, float(r["progress"]["current"])) for r in records
                               if r["kind"] == "objective" and r["id"] == oid] + [(end, float(target))]
        assert [tuple(p) for p in lines[f"objective:{oid}"].get_xydata().tolist()] == want
    series = {s.id: s for s in objective_series(records)}
    assert series["repair"].status == "completed" and series["resupply"].points[-1][1] == 3


def test_timeline_bars_are_the_agents_actions_by_lane(seed3):
    """One bar per accepted action, on its agent's lane, from its command to its completion; colour by tool."""
    records = read_records(seed3)
    fig = timeline_figure(records)
    ax = fig.axes[0]
    bars = [(p.get_gid(), round(p.get_x(), 3), round(p.get_width(), 3)) for p in ax.patches if p.get_gid()]
    spans = action_spans(records)
    assert len(bars) == len(spans) and spans
    repair = [s for s in spans if s.tool == "repair"]
    assert [(s.agent, s.lane, s.start, s.end, s.outcome) for s in repair] == \
        [("engineer-1", "body", 20000, 24000, "completed"), ("engineer-1", "body", 24000, 28000, "completed")]
    assert ("action:engineer-1:body:repair", 20.0, 4.0) in bars
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["courier-1 · body", "engineer-1 · body", "engineer-1 · voice", "medic-1 · body"]
    colours = {p.get_gid().split(":")[-1]: p.get_facecolor() for p in ax.patches if p.get_gid()}
    assert len(set(colours.values())) == len(colours)  # one colour per tool


def test_rejections_are_marked_on_the_timeline(tmp_path):
    """A random policy gets actions rejected: each is a red x at its time on its agent's lane."""
    trace = tmp_path / "random.jsonl"
    main(["run", "contention", "--seed", "1", "--policy", "random", "--trace", str(trace), "--quiet"])
    records = read_records(trace)
    rejected = [r for r in records if r["kind"] == "outcome" and r["outcome"] == "rejected"]
    assert rejected
    fig = timeline_figure(records)
    marks = [c for c in fig.axes[0].collections if (c.get_gid() or "").startswith("rejected:")]
    shown = sorted(float(x) for c in marks for x, _ in c.get_offsets())
    spans = [s for s in action_spans(records) if s.outcome == "rejected"]
    plotted_agents = {t.get_text().split(" · ")[0] for t in fig.axes[0].get_yticklabels()}
    assert shown == sorted(s.start / 1000 for s in spans if s.agent in plotted_agents)
    assert len(spans) == len([r for r in rejected if "#" in r["observation_id"]])


def test_eval_plot_shows_completion_and_score_over_seeds(tmp_path, capsys):
    """`warren eval --plot DIR`: the completion line and score points are the report's per-seed values."""
    assert main(["eval", "bridge_repair", "--seeds", "0-4", "--json", "--plot", str(tmp_path / "ev")]) == 0
    report = json.loads(capsys.readouterr().out)["results"]
    assert sorted(p.name for p in (tmp_path / "ev").iterdir()) == [
        "eval_completion.png", "eval_completion.svg", "eval_sim_time.png", "eval_sim_time.svg"]
    figs = eval_figures(report)
    lines = {line.get_gid(): line for ax in figs["eval_completion"].axes for line in ax.lines}
    assert lines["completion:bridge_repair"].get_xydata().tolist() == [[s, 1.0] for s in range(5)]
    assert lines["score:bridge_repair"].get_xydata().tolist() == [[r["seed"], r["score"]]
                                                                  for r in report[0]["per_seed"]]
    heights = [p.get_height() for p in figs["eval_sim_time"].axes[0].patches]
    assert sum(heights) == 5


def test_report_of_something_else_is_a_usage_error(tmp_path, capsys):
    """A file that is not a journal: exit 2 and a sentence, no traceback."""
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"kind": "status"}\n')
    assert main(["report", str(bad)]) == 2
    assert "no 'run' record" in capsys.readouterr().err
