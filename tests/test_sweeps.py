"""Sweeps on local processes: the same report for any --jobs, --grid, --out resume, failing seeds as rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sweeps_support import CONTENTION, WARREN_GRID, eval_json, run_cli, table_without_wall

from warren_sim.cli import main
from warren_sim.evaluation import SweepError, evaluate, parse_grid, render_table, without_wall
from warren_sim.evaluation.runs import Task, run_task

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [CONTENTION, WARREN_GRID], ids=["contention", "warren-grid"])
def test_jobs_1_and_jobs_2_give_the_same_report(argv: list[str], capsys) -> None:
    """40 seeds of contention, and warren over a 2x2 grid: --jobs 1 and --jobs 2 print the same JSON and
    the same table apart from wall-clock fields, with per-seed rows in seed order."""
    one = eval_json([*argv, "--jobs", "1"], capsys)
    two = eval_json([*argv, "--jobs", "2"], capsys)
    assert without_wall(one) == without_wall(two)
    assert one != two  # the wall-clock fields are there, and differ
    for result in two["results"]:
        assert [r["seed"] for r in result["per_seed"]] == list(range(40))
        assert result["runs"] == 40 and result["wall_s"] > 0
    seeds_text = argv[argv.index("--seeds") + 1]
    assert table_without_wall(render_table(one, seeds_text)) == table_without_wall(render_table(two, seeds_text))
    assert render_table(one, seeds_text) != render_table(two, seeds_text)  # ... but for the wall columns


def test_the_table_is_printed_with_the_wall_columns_last(capsys) -> None:
    """The table warren eval prints is render_table of the report; its last two columns are the wall ones."""
    lines = run_cli(["eval", "deadline", "--seeds", "0-3", "--jobs", "2"], capsys).splitlines()
    assert lines[2].split()[-2:] == ["wall-sum", "decisions/s"]
    assert table_without_wall("\n".join(lines))[4].split() == ["deadline", "-", "4", "100.0%", "55.0s", "55.0s",
                                                                "33.0", "1.000"]


def test_a_grid_is_one_result_per_combination_in_order(capsys) -> None:
    """--grid agents=3,8 --grid layout=0,1 gives four results, first key slowest; warren scores its agents."""
    data = eval_json([*WARREN_GRID[:4], "--seeds", "0-2", *WARREN_GRID[4:], "--jobs", "1"], capsys)
    assert [r["params"] for r in data["results"]] == [
        {"agents": 3, "layout": 0}, {"agents": 3, "layout": 1}, {"agents": 8, "layout": 0}, {"agents": 8, "layout": 1}]
    assert [r["score"]["mean"] for r in data["results"]] == [3.0, 3.0, 8.0, 8.0]
    assert data["grid"] == {"agents": ["3", "8"], "layout": ["0", "1"]}
    assert data["runs"] == data["computed"] == 12


def test_several_scenarios_as_a_comma_list(capsys) -> None:
    """'deadline,relay' and 'deadline relay' are the same sweep."""
    a = eval_json(["eval", "deadline,relay", "--seeds", "0-2", "--jobs", "1"], capsys)
    b = eval_json(["eval", "deadline", "relay", "--seeds", "0-2", "--jobs", "1"], capsys)
    assert [r["scenario"] for r in a["results"]] == ["deadline", "relay"]
    assert without_wall(a) == without_wall(b)


@pytest.mark.parametrize(("argv", "message"), [
    (["--grid", "agents"], "--grid expects NAME=V1,V2"),
    (["--grid", "agents=3,x"], "parameter agents of warren must be a int"),
    (["--grid", "agents=3", "--param", "agents=4"], "both fixed (--param) and varied (--grid)"),
    (["--grid", "agents=3", "--grid", "agents=4"], "given twice"),
    (["--grid", "tunnels=1,2"], "has no parameter 'tunnels'"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--address", "auto"], "--address is for --ray"),
    (["--ray", "--jobs", "2"], "--jobs is for local processes"),
])
def test_bad_sweeps_are_usage_errors(argv: list[str], message: str, capsys) -> None:
    """A bad grid, --jobs or backend option is refused before anything runs: exit 2 and a message."""
    assert main(["eval", "warren", "--seeds", "0-1", *argv]) == 2
    assert message in capsys.readouterr().err


def test_failing_seeds_are_rows_with_their_error_and_the_sweep_completes(capsys) -> None:
    """A policy that raises in 7 of 40 seeds: those rows are crashed with the exception, the other 33
    complete, and --jobs 1 and --jobs 2 agree on which."""
    argv = [*CONTENTION, "--policy", "sweeps_support:fragile"]
    one = eval_json([*argv, "--jobs", "1"], capsys)
    two = eval_json([*argv, "--jobs", "2"], capsys)
    assert without_wall(one) == without_wall(two)
    (result,) = two["results"]
    crashed = [r for r in result["per_seed"] if r["status"] == "crashed"]
    assert len(crashed) == 7 and result["completed"] == 33 and result["errors"] == 7
    assert all(r["error"] == "RuntimeError: fragile policy gave up at t=10s" for r in crashed)
    assert all(r["score"] == 0.0 and r["sim_time_ms"] == 10_000 for r in crashed)
    assert "crashed: crashed: RuntimeError: fragile policy gave up at t=10s" in result["not_completed"][0]["reason"]


def test_a_worker_that_dies_is_an_error_row_and_the_others_complete(capsys) -> None:
    """A policy that ends its process (os._exit) in seeds 14 and 19 of 10-19: with --jobs 2 the pool is
    rebuilt, those seeds are error rows naming the dead worker, and the other 8 complete with the rows
    they have in this process."""
    argv = ["eval", "contention", "--seeds", "10-19"]
    dead = eval_json([*argv, "--policy", "sweeps_support:deadly", "--jobs", "2"], capsys)
    fine = eval_json([*argv, "--policy", "sweeps_support:fragile", "--jobs", "1"], capsys)
    (result,) = dead["results"]
    errors = [r for r in result["per_seed"] if r["status"] == "error"]
    assert [r["seed"] for r in errors] == [14, 19]
    assert [r["seed"] for r in fine["results"][0]["per_seed"] if r["status"] == "crashed"] == [14, 19]
    assert all("worker process died" in r["error"] for r in errors)
    assert result["statuses"] == {"completed": 8, "error": 2} and result["errors"] == 2
    good = [without_wall(r) for r in result["per_seed"] if r["status"] != "error"]
    assert good == [without_wall(r) for r in fine["results"][0]["per_seed"] if r["status"] != "crashed"]


def test_tokens_are_summed_per_row_and_in_the_report(capsys) -> None:
    """Policies exposing usage: each row sums its policies' tokens, each result and the sweep total them,
    and the table shows them."""
    data = eval_json([*CONTENTION[:2], "--seeds", "0-4", "--policy", "sweeps_support:counted", "--jobs", "2"],
                     capsys)
    (result,) = data["results"]
    for row in result["per_seed"]:
        assert row["tokens"] == {"prompt": 10 * row["decisions"], "completion": 2 * row["decisions"]}
    total = result["decisions"]["total"]
    assert result["tokens"] == data["tokens"] == {"prompt": 10 * total, "completion": 2 * total}
    table = run_cli([*CONTENTION[:2], "--seeds", "0-4", "--policy", "sweeps_support:counted", "--jobs", "1"], capsys)
    assert "tokens in" in table and f"tokens: {10 * total:,} prompt + {2 * total:,} completion" in table
    assert "tokens" not in eval_json([*CONTENTION[:2], "--seeds", "0", "--jobs", "1"], capsys)["results"][0]["per_seed"][0]


def test_out_resumes_from_the_rows_already_there(tmp_path: Path, capsys) -> None:
    """--out gets one line per seed; a rerun with a file holding a prefix of them (and a line cut by a kill)
    computes only the missing seeds and prints the same report."""
    out = tmp_path / "sweep.jsonl"
    full = eval_json([*CONTENTION, "--jobs", "2", "--out", str(out)], capsys)
    lines = out.read_text().splitlines()
    assert len(lines) == 40 and full["computed"] == 40
    assert sorted(json.loads(line)["seed"] for line in lines) == list(range(40))
    again = eval_json([*CONTENTION, "--jobs", "2", "--out", str(out)], capsys)
    assert again["computed"] == 0 and without_wall(again) == without_wall(full)
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join(lines[:15]) + "\n" + lines[15][:30])  # a kill cut line 16 short
    resumed = eval_json([*CONTENTION, "--jobs", "2", "--out", str(part)], capsys)
    assert resumed["computed"] == 25 and without_wall(resumed) == without_wall(full)
    rows = [json.loads(line) for line in part.read_text().splitlines() if line.startswith("{") and line.endswith("}")]
    assert sorted(r["seed"] for r in rows) == list(range(40))


def test_out_keys_rows_by_scenario_params_policy_and_seed(tmp_path: Path, capsys) -> None:
    """Another policy or setting in the same --out file is computed, not taken from rows of another sweep;
    error rows (a dead worker) are run again."""
    out = tmp_path / "sweep.jsonl"
    eval_json(["eval", "deadline", "--seeds", "0-2", "--jobs", "1", "--out", str(out)], capsys)
    assert eval_json(["eval", "deadline", "--seeds", "0-3", "--jobs", "1", "--out", str(out)], capsys)["computed"] == 1
    assert eval_json(["eval", "deadline", "--seeds", "0-3", "--policy", "none", "--jobs", "1", "--out", str(out)],
                     capsys)["computed"] == 4
    row = json.loads(out.read_text().splitlines()[0])
    out.write_text(json.dumps({**row, "status": "error", "error": "lost"}) + "\n")
    assert eval_json(["eval", "deadline", "--seeds", "0", "--jobs", "1", "--out", str(out)], capsys)["computed"] == 1


@pytest.mark.slow
def test_a_sweep_killed_half_way_resumes_with_only_the_missing_rows(tmp_path: Path, capsys) -> None:
    """A real `warren eval --jobs 2 --out F` process group is SIGKILLed once rows appear; the rerun computes
    exactly the seeds not in F and ends with the report of an uninterrupted sweep."""
    argv = ["eval", "warren", "--seeds", "0-79", "--param", "agents=25", "--jobs", "2"]
    out = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "warren_sim.cli", *argv, "--out", str(out), "--quiet"],
                            cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(3000):  # bounded: at most 60 s of 20 ms polls
            if out.exists() and out.read_text().count("\n") >= 15 or proc.poll() is not None:
                break
            _pause(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the parent and its worker processes, like a pre-empted node
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    kept = {json.loads(line)["seed"] for line in out.read_text().splitlines() if line.endswith("}")}
    assert 15 <= len(kept) < 80
    resumed = eval_json([*argv, "--out", str(out)], capsys)
    assert resumed["computed"] == 80 - len(kept)
    fresh = eval_json(argv, capsys)
    assert without_wall(resumed) == without_wall(fresh)


def _pause(seconds: float) -> None:
    """A real pause while polling a file another process writes (no trio here: a plain subprocess test)."""
    import select

    select.select([], [], [], seconds)


def test_the_python_api_takes_lists_dicts_and_a_grid() -> None:
    """evaluate() from a notebook: scenario list, seed range, typed params and grid; wall fields None without
    a clock."""
    data = evaluate(["warren"], range(3), grid={"agents": [2, 4]}, params={"layout": 1}, jobs=1)
    assert [r["params"] for r in data["results"]] == [{"agents": 2, "layout": 1}, {"agents": 4, "layout": 1}]
    assert data["results"][0]["wall_s"] is None and data["elapsed_s"] is None
    with pytest.raises(SweepError, match="backend 'dask'"):
        evaluate("warren", [0], backend="dask")
    assert parse_grid(["agents=1, 2"]) == {"agents": ["1", "2"]}


def test_a_task_is_names_and_numbers_and_its_row_carries_its_key() -> None:
    """What a worker gets pickles small; the row it returns says what it was computed from."""
    import pickle

    task = Task("contention", {"potters": 4, "tongs": 2, "pots": 2}, 3, "solution", False, "contention")
    assert len(pickle.dumps(task)) < 400
    row = run_task(task)
    assert row["scenario"] == "contention" and row["seed"] == 3 and row["status"] == "completed"
    assert row["wall_s"] is None


def test_workers_do_not_import_trio() -> None:
    """A local worker runs a seed with only engine and scenarios loaded: trio is not imported there."""
    from warren_sim.evaluation import backends

    rows: list[Any] = []
    tasks = [Task("deadline", {}, s, "sweeps_support:trio_check", False, "deadline") for s in range(2)]
    backends.run_local(tasks, lambda i, row: rows.append(row), None, 2)
    assert [r["error"] for r in rows] == ["RuntimeError: trio absent"] * 2


def test_without_ray_installed_ray_is_a_teaching_usage_error() -> None:
    """With Ray not importable, --ray exits 2 naming the extra to install; evaluation never imports Ray
    unless asked."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "import warren_sim.evaluation\n"
            "from warren_sim.cli import main\n"
            "sys.exit(main(['eval', 'deadline', '--seeds', '0', '--ray']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--ray needs Ray" in proc.stderr and "pip install 'warren-sim[ray]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_progress_line_shows_seeds_done_rate_and_eta() -> None:
    """Fed rows at known clock readings, the line says seeds done of total, seeds/s since the first computed
    row and the ETA; rows found in --out count as done but not in the rate; at most ten redraws a second."""
    import io

    from warren_sim.cli.eval import ProgressLine

    readings = iter([100.0, 102.0, 102.05, 104.0])
    stream = io.StringIO()
    line = ProgressLine(stream, clock=lambda: next(readings))
    line(10, 110, None)  # 10 rows were already in --out
    line(11, 110, {"seed": 10})  # t=100: the first computed row, no rate yet
    assert stream.getvalue().endswith("  11/110 seeds  (10 from --out)  - seeds/s  ETA -   ")
    line(31, 110, {"seed": 30})  # t=102: 20 more in 2 s
    assert stream.getvalue().endswith("  31/110 seeds  (10 from --out)  10.0 seeds/s  ETA 8s   ")
    line(32, 110, {"seed": 31, "error": "x"})  # t=102.05: not redrawn, but the error is counted
    assert stream.getvalue().count("\r") == 2
    line(71, 110, {"seed": 70})  # t=104: 60 in 4 s
    assert stream.getvalue().endswith("71/110 seeds  (10 from --out)  15.0 seeds/s  ETA 3s  1 error(s)   ")


def test_an_edited_scenario_is_loaded_again_in_the_same_process(tmp_path: Path) -> None:
    """Workers cache a loaded scenario, but by its files' stamps: after an edit, the next sweep runs the new one."""
    import shutil

    own = tmp_path / "my_deadline"
    shutil.copytree(REPO / "scenarios" / "deadline", own)
    before = evaluate(str(own), [0], jobs=1)["results"][0]
    assert before["completion_rate"] == 1.0
    toml = own / "scenario.toml"
    text = toml.read_text()
    assert "time_limit_ms" in text
    edited = "\n".join("time_limit_ms = 1000" if line.startswith("time_limit_ms") else line
                       for line in text.splitlines())
    toml.write_text(edited + "\n# edited\n")
    after = evaluate(str(own), [0], jobs=1)["results"][0]
    assert after["sim_time_ms"]["max"] <= 1000 and after["completion_rate"] == 0.0
