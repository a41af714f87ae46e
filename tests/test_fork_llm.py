"""A fork of a run the LLM policy played: the policy is brought to the fork point by recall (its history rebuilt
from the journal, no request sent for the past), and the fork continued with it is its parent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_stub import play_solution, scripted_model, solution_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _warren(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WARREN_LLM_"))}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "warren_sim.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=full, stdin=subprocess.DEVNULL)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_fork_of_an_llm_run_recalls_its_history_and_continues_as_the_parent(tmp_path: Path) -> None:
    table = solution_table("bridge_repair", [3])
    with scripted_model(play_solution(table)) as model:
        parent = _warren(model.env(), "run", "bridge_repair", "--seed", "3", "--policy", "llm",
                         "--trace", str(tmp_path / "parent.jsonl"))
        assert parent.returncode == 0, parent.stderr
        asked_by_parent = len(model.requests)
        fork = _warren(model.env(), "fork", str(tmp_path / "parent.jsonl"), "--cursor", "60", "--policy", "llm",
                       "--trace", str(tmp_path / "fork.jsonl"))
        assert fork.returncode == 0, fork.stderr
        asked_by_fork = model.requests[asked_by_parent:]
    records = _records(tmp_path / "parent.jsonl")
    forked = _records(tmp_path / "fork.jsonl")
    own = {"cursor", "forked_from", "run_id"}
    assert [{k: v for k, v in r.items() if k not in own} for r in forked] == \
        [{k: v for k, v in r.items() if k not in own} for r in records]
    boundary = forked[0]["forked_from"]["batch_cursor"]
    after = [r for r in records if r["kind"] == "command" and r["cursor"] > boundary]
    assert len(asked_by_fork) == len(after)  # the past was recalled, not asked again
    first = asked_by_fork[0]["messages"]
    assert any(m["role"] == "assistant" and m.get("tool_calls") for m in first)  # the history is there
