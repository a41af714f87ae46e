"""Cross-play (warren eval --focal ... --partners ...), verified results (warren verify), the leaderboard."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from chromium import chromium, chromium_path

from warren_sim.cli import main
from warren_sim.evaluation import without_wall

HELD_OUT = textwrap.dedent('''
    """Lazy: the engineer and the medic do nothing at all; the courier is the solution's."""
    import warren_sim.scenarios as scenarios

    SOLUTION = scenarios.load_scenario("bridge_repair").solution


    class Idle:
        def decide(self, obs):
            return {"sleep_ms": 60000}


    def factory(agent_id, role, briefing):
        if role == "courier":
            return SOLUTION.make_policy(agent_id, role, briefing)
        return Idle()
''')

FOCAL = ["--focal", "engineer=solution", "--focal", "engineer=random"]


def cli(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> str:
    capsys.readouterr()
    got = main(argv)
    captured = capsys.readouterr()
    assert got == code, captured.out + captured.err
    return captured.out if code == 0 else captured.out + captured.err


@pytest.fixture
def held_out(tmp_path: Path) -> Path:
    folder = tmp_path / "held_out"
    folder.mkdir()
    (folder / "lazy.py").write_text(HELD_OUT, encoding="utf-8")
    return folder


def crossplay_argv(held_out: Path, *extra: str, seeds: str = "0-5") -> list[str]:
    return ["eval", "bridge_repair", *FOCAL, "--partners", "solution,noisy,lazy", "--populations", str(held_out),
            "--seeds", seeds, "--quiet", "--json", *extra]


def comparable(results: dict[str, Any]) -> dict[str, Any]:
    """What no backend may change: everything but wall-clock fields and where the journals went."""
    return {k: v for k, v in without_wall(results).items() if k != "journals"}


def test_held_out_populations_get_their_column_and_jobs_1_and_2_agree(held_out: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    one = json.loads(cli(crossplay_argv(held_out, "--jobs", "1"), capsys))
    two = json.loads(cli(crossplay_argv(held_out, "--jobs", "2"), capsys))
    assert comparable(one) == comparable(two)
    assert [p["name"] for p in one["populations"]] == ["solution", "noisy", "lazy"]
    lazy = next(p for p in one["populations"] if p["name"] == "lazy")
    assert lazy["source"] == "held-out" and lazy["description"].startswith("Lazy: the engineer and the medic")
    assert one["focal"] == ["engineer=solution", "engineer=random"] and one["baselines"] == ["engineer=none"]
    cells = {(c["focal"], c["population"]): c for c in one["cells"]}
    assert len(cells) == 3 * 3
    # with the solution's engineer, the lazy medic does not matter (the courier carries every medkit)
    assert cells[("engineer=solution", "lazy")]["completion_rate"] == 1.0
    assert cells[("engineer=none", "solution")]["completion_rate"] == 0.0
    solo = cells[("engineer=solution", "solution")]
    assert solo["runs"] == 6 and solo["completion_ci"][1] == 1.0 and solo["completion_ci"][0] < 1.0
    assert solo["score"]["ci"] == [1.0, 1.0] and len(solo["per_seed"]) == 6
    table = cli([a for a in crossplay_argv(held_out, "--jobs", "1") if a != "--json"], capsys)  # the table
    assert re.search(r"engineer=none \(baseline\)\s+0% \[0-\d+\]", table)
    assert "lazy (held-out): Lazy: the engineer" in table


def test_out_resumes_a_crossplay(held_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    first = json.loads(cli(crossplay_argv(held_out, "--jobs", "1", "--out", str(out), seeds="0-2"), capsys))
    again = json.loads(cli(crossplay_argv(held_out, "--jobs", "2", "--out", str(out), seeds="0-3"), capsys))
    assert first["computed"] == 27 and again["computed"] == 9 and again["runs"] == 36
    fresh = json.loads(cli(crossplay_argv(held_out, "--jobs", "1", seeds="0-3"), capsys))
    assert comparable(again) == comparable(fresh)


def test_bad_crossplay_arguments_teach(held_out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = cli(["eval", "bridge_repair", "--focal", "pilot=solution", "--seeds", "0"], capsys, 2)
    assert "neither a role nor an agent of bridge_repair; its roles: engineer, courier, medic" in err
    err = cli(["eval", "bridge_repair", "--focal", "engineer=solution", "--partners", "nope", "--seeds", "0"],
              capsys, 2)
    assert "no population 'nope'; available: solution, cautious, dropper, hoarder, noisy" in err
    err = cli(["eval", "bridge_repair", "--partners", "noisy", "--seeds", "0"], capsys, 2)
    assert "add --focal ROLE=SPEC" in err


def test_plot_writes_the_heatmaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(["eval", "bridge_repair", "--focal", "engineer=solution", "--partners", "solution,hoarder", "--seeds", "0-1",
         "--jobs", "1", "--quiet", "--plot", str(tmp_path / "plots")], capsys)
    svg = (tmp_path / "plots" / "crossplay_score.svg").read_text(encoding="utf-8")
    assert "cell:engineer=solution:hoarder" in svg and (tmp_path / "plots" / "crossplay_completion.png").is_file()


# -- verify -------------------------------------------------------------------------------------------------
@pytest.fixture
def verified(held_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, Path]:
    """Fresh results of a cross-play with journals: (results file, journals dir, held-out dir)."""
    journals = tmp_path / "journals"
    results = tmp_path / "results.json"
    results.write_text(cli(["eval", "bridge_repair", "--focal", "engineer=solution", "--partners", "noisy,lazy",
                            "--populations", str(held_out), "--seeds", "0-2", "--jobs", "1", "--quiet", "--json",
                            "--journals", str(journals)], capsys), encoding="utf-8")
    return results, journals, held_out


def test_verify_passes_on_fresh_results(verified: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    results, journals, _ = verified
    out = cli(["verify", str(results)], capsys)
    assert "verified: 12 run(s) replay identically" in out
    report = json.loads(cli(["verify", str(results), "--journals", str(journals), "--json"], capsys))
    assert report == {"ok": True, "runs": 12, "failed_runs": [], "problems": []}
    assert len(list(journals.glob("*.jsonl"))) == 12


def test_verify_names_the_run_whose_journal_command_changed(verified: tuple[Path, Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    results, journals, _ = verified
    run = "bridge_repair.engineer_solution-836e1a.noisy.s1"
    path = journals / f"{run}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    k = next(i for i, line in enumerate(lines) if '"kind":"command"' in line and '"engineer-1' in line
             and '"action":"take"' in line)
    record = json.loads(lines[k])
    record["command"] = {"sleep_ms": 1000}  # the engineer "did" something else than it did
    lines[k] = json.dumps(record, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = json.loads(cli(["verify", str(results), "--json"], capsys, 1))
    assert report["failed_runs"] == [run]
    assert report["problems"][0]["what"] == "journal" and "replaying the journal differs" in report["problems"][0]["detail"]
    text = cli(["verify", str(results)], capsys, 1)
    assert "NOT verified: 1 of 12 run(s) differ" in text and run in text


def test_verify_names_the_run_whose_score_changed(verified: tuple[Path, Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    results, _, _ = verified
    data = json.loads(results.read_text(encoding="utf-8"))
    cell = next(c for c in data["cells"] if c["population"] == "lazy" and c["focal"] == "engineer=none")
    cell["per_seed"][2]["score"] = 1.0  # a better score than the run had
    results.write_text(json.dumps(data), encoding="utf-8")
    report = json.loads(cli(["verify", str(results), "--json"], capsys, 1))
    name = cell["per_seed"][2]["run"]
    assert name in report["failed_runs"]
    details = [p["detail"] for p in report["problems"] if name in p["runs"]]
    assert any("the replayed run scores 0.0; the results say 1.0" in d for d in details)


def test_verify_names_the_runs_of_a_population_file_changed_afterwards(verified: tuple[Path, Path, Path],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    results, _, held_out = verified
    lazy = held_out / "lazy.py"
    lazy.write_text(lazy.read_text(encoding="utf-8") + "\n# changed after the results were made\n", encoding="utf-8")
    report = json.loads(cli(["verify", str(results), "--json"], capsys, 1))
    data = json.loads(results.read_text(encoding="utf-8"))
    lazy_runs = sorted(r["run"] for c in data["cells"] if c["population"] == "lazy" for r in c["per_seed"])
    assert report["failed_runs"] == lazy_runs and len(lazy_runs) == 6
    assert all(p["what"] == "hash" and "lazy.py differs" in p["detail"] for p in report["problems"])
    # the organiser's own copy of the held-out set, elsewhere: --populations DIR finds it by name
    moved = held_out.parent / "organiser"
    moved.mkdir()
    (moved / "lazy.py").write_text(HELD_OUT, encoding="utf-8")
    assert json.loads(cli(["verify", str(results), "--json", "--populations", str(moved)], capsys))["ok"]


def test_verify_refuses_what_is_not_crossplay_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "eval.json"
    bad.write_text(json.dumps({"results": []}), encoding="utf-8")
    assert "not cross-play results" in cli(["verify", str(bad)], capsys, 2)


# -- leaderboard ----------------------------------------------------------------------------------------------
@pytest.fixture
def submissions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[Path]:
    files = []
    for name, focal in (("alice", "engineer=solution"), ("bob", "engineer=random")):
        path = tmp_path / f"{name}.json"
        path.write_text(cli(["eval", "bridge_repair", "--focal", focal, "--partners", "solution,cautious,noisy",
                             "--seeds", "0-3", "--jobs", "1", "--quiet", "--json"], capsys), encoding="utf-8")
        files.append(path)
    return files


def _md_rows(md: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in md.splitlines() if line.startswith("| ") and "rank" not in line]
    return [[c.strip() for c in row] for row in rows]


def test_leaderboard_markdown_matches_its_json(submissions: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    board = json.loads(cli(["leaderboard", *map(str, submissions), "--json"], capsys))
    (scenario,) = board["boards"]
    entries = scenario["entries"]
    assert [e["submission"] for e in entries] == ["alice", "bob"]  # the solution's engineer ranks first
    assert entries[0]["aggregate"] == pytest.approx(1.0) and entries[1]["aggregate"] < 1.0
    md = cli(["leaderboard", *map(str, submissions), "--md"], capsys)
    rows = _md_rows(md)
    assert len(rows) == len(entries)
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    for row, e in zip(rows, entries, strict=True):
        assert row == [str(e["rank"]), e["submission"], f"`{e['focal']}`", fmt(e["aggregate"]),
                       *(fmt(c["normalised"]) for c in e["cells"])]
    header = next(line for line in md.splitlines() if line.startswith("| rank"))
    assert header.split("|")[5:-1] == [f" {p} " for p in scenario["populations"]]


@pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (apt-get install -y chromium)")
async def test_leaderboard_html_opens_in_chromium(submissions: list[Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    page_file = tmp_path / "board.html"
    cli(["leaderboard", *map(str, submissions), "--html", str(page_file)], capsys)
    text = page_file.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text) and "<script" not in text
    async with chromium(tmp_path / "profile") as browser, browser.page(page_file.as_uri()) as page:
        assert await page.evaluate("document.title") == "WARREN leaderboard"
        ranked = await page.evaluate("[...document.querySelectorAll('tr.entry td:nth-child(2)')]"
                                     ".map(td => td.textContent).join(',')")
        assert ranked == "alice,bob"
        assert await page.evaluate("document.querySelectorAll('details table tr').length") == 2 * (1 + 3)
        assert page.errors == []
        await page.screenshot(tmp_path / "board.png")
    assert (tmp_path / "board.png").stat().st_size > 1000
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
