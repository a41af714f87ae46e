"""Cross-play on a real local Ray (2 CPUs): the same results as --jobs 1 and --jobs 2, held-out column included.

Slow-tier like tests/test_sweeps_ray.py (starting Ray costs 5-15 s here); tests/test_crossplay.py compares
--jobs 1 with --jobs 2 in the fast tier.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_crossplay import HELD_OUT, comparable, crossplay_argv

from warren_sim.cli import main

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_jobs_1_jobs_2_and_ray_give_the_same_crossplay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    held_out = tmp_path / "held_out"
    held_out.mkdir()
    (held_out / "lazy.py").write_text(HELD_OUT, encoding="utf-8")
    outs = []
    for extra in (["--jobs", "1"], ["--jobs", "2"], ["--ray"]):
        capsys.readouterr()
        assert main(crossplay_argv(held_out, *extra, "--journals", str(tmp_path / extra[-1].strip("-")))) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert comparable(outs[0]) == comparable(outs[1]) == comparable(outs[2])
    assert [p["name"] for p in outs[2]["populations"]] == ["solution", "noisy", "lazy"]
    # the journals each backend kept are the same bytes
    names = sorted(p.name for p in (tmp_path / "1").glob("*.jsonl"))
    assert len(names) == 3 * 3 * 6
    for name in names:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes() == \
            (tmp_path / "ray" / name).read_bytes()
