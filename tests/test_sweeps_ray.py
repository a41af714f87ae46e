"""Sweeps on a real local Ray (2 CPUs): the same report as local processes, failing seeds, resume.

One Ray session serves the whole module (starting Ray costs 5-15 s here), so the module is slow-tier;
tests/test_sweeps.py covers the same report with local processes in the fast tier.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweeps_support import CONTENTION, WARREN_GRID, eval_json

from warren_sim.evaluation import without_wall

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow
TESTS = str(Path(__file__).resolve().parent)


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[None]:
    """A local Ray with 2 CPUs whose workers can import this directory's policies (sweeps_support)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([TESTS, *[p for p in sys.path if p]])}})
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.parametrize("argv", [CONTENTION, WARREN_GRID], ids=["contention", "warren-grid"])
def test_jobs_1_jobs_2_and_ray_give_the_same_report(argv: list[str], capsys) -> None:
    """40 seeds of contention and a 2x2 grid of warren: --jobs 1, --jobs 2 and --ray print the same JSON apart
    from wall-clock fields."""
    one = eval_json([*argv, "--jobs", "1"], capsys)
    two = eval_json([*argv, "--jobs", "2"], capsys)
    on_ray = eval_json([*argv, "--ray"], capsys)
    assert without_wall(one) == without_wall(two) == without_wall(on_ray)
    assert all(r["wall_s"] > 0 for r in on_ray["results"])
    assert [r["seed"] for r in on_ray["results"][0]["per_seed"]] == list(range(40))


def test_a_failing_seed_on_ray_is_a_row_with_its_error(capsys) -> None:
    """The policy that raises in 7 of 40 seeds gives the same crashed rows on Ray as in this process."""
    argv = [*CONTENTION, "--policy", "sweeps_support:fragile"]
    on_ray = eval_json([*argv, "--ray"], capsys)
    assert without_wall(on_ray) == without_wall(eval_json([*argv, "--jobs", "1"], capsys))
    (result,) = on_ray["results"]
    assert result["statuses"] == {"completed": 33, "crashed": 7}
    assert {r["error"] for r in result["per_seed"] if r["status"] == "crashed"} == \
        {"RuntimeError: fragile policy gave up at t=10s"}


def test_ray_resumes_from_rows_written_by_local_processes(tmp_path: Path, capsys) -> None:
    """Half the rows from a --jobs 2 sweep, then --ray with the same --out: Ray computes only the other half
    (with token counts), and the report is the uninterrupted one."""
    argv = [*CONTENTION, "--policy", "sweeps_support:counted"]
    full = eval_json([*argv, "--jobs", "1"], capsys)
    out = tmp_path / "half.jsonl"
    eval_json([*argv[:2], "--seeds", "0-19", *argv[4:], "--jobs", "2", "--out", str(out)], capsys)
    resumed = eval_json([*argv, "--ray", "--out", str(out)], capsys)
    assert resumed["computed"] == 20
    assert without_wall(resumed) == without_wall(full)
    assert resumed["tokens"]["prompt"] == 10 * resumed["results"][0]["decisions"]["total"]
    assert sorted(json.loads(line)["seed"] for line in out.read_text().splitlines()) == list(range(40))


def test_a_ray_worker_that_dies_is_an_error_row(capsys) -> None:
    """A policy that ends its Ray worker's process in seed 14: after Ray's retry, seed 14 is an error row naming
    the dead task, and seed 13 completes."""
    data = eval_json(["eval", "contention", "--seeds", "13-14", "--policy", "sweeps_support:deadly", "--ray"], capsys)
    (result,) = data["results"]
    assert [r["status"] for r in result["per_seed"]] == ["completed", "error"]
    assert result["per_seed"][1]["error"].startswith("the Ray task died: ")
