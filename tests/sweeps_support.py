"""Policies and helpers for the sweep tests, importable by worker processes and Ray workers (``sweeps_support:...``).

Each wraps contention's own solution and misbehaves at one (agent, sim time) that only some seeds
reach (potter-1 decides at t=10 s in 7 of seeds 0-39), so which seeds fail depends on the seed alone,
the same in every process and on every backend.
"""

from __future__ import annotations

import os
from typing import Any

from warren_sim.scenarios import load_scenario

TRIGGER = ("potter-1", 10_000)
_solution = load_scenario("contention").solution
assert _solution is not None


class _Wrapped:
    def __init__(self, agent_id: str, role: str, briefing: dict[str, Any], action: str) -> None:
        self.inner = _solution.make_policy(agent_id, role, briefing)
        self.agent_id = agent_id
        self.action = action
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

    def decide(self, obs: Any) -> dict[str, Any]:
        self.usage["prompt_tokens"] += 10  # as an LLM policy would count them: 10 in, 2 out per decision
        self.usage["completion_tokens"] += 2
        if self.action != "never" and (self.agent_id, obs.time) == TRIGGER:
            if self.action == "raise":
                raise RuntimeError("fragile policy gave up at t=10s")
            os._exit(3)  # a worker that dies: killed, out of memory, a native crash
        return self.inner.decide(obs)  # type: ignore[no-any-return]


def fragile(agent_id: str, role: str, briefing: dict[str, Any]) -> _Wrapped:
    """Raises in decide at the trigger."""
    return _Wrapped(agent_id, role, briefing, "raise")


def deadly(agent_id: str, role: str, briefing: dict[str, Any]) -> _Wrapped:
    """Ends its whole process at the trigger."""
    return _Wrapped(agent_id, role, briefing, "exit")


def counted(agent_id: str, role: str, briefing: dict[str, Any]) -> _Wrapped:
    """contention's solution, counting 10 prompt and 2 completion tokens per decision."""
    return _Wrapped(agent_id, role, briefing, "never")


# -- helpers ---------------------------------------------------------------------------------------------
CONTENTION = ["eval", "contention", "--seeds", "0-39"]
WARREN_GRID = ["eval", "warren", "--seeds", "0-39", "--grid", "agents=3,8", "--grid", "layout=0,1"]


def run_cli(argv: list[str], capsys: Any) -> str:
    """``warren ARGV`` in this process; its stdout (it must exit 0)."""
    from warren_sim.cli import main

    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def eval_json(argv: list[str], capsys: Any) -> dict[str, Any]:
    import json

    return json.loads(run_cli([*argv, "--json"], capsys))  # type: ignore[no-any-return]


def table_without_wall(text: str) -> list[str]:
    """The table's lines with the wall-clock columns (the last two: wall-sum, decisions/s) cut off."""
    return [" ".join(line.split()[:-2]) if len(line.split()) > 2 else line for line in text.splitlines()]


def trio_check(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    """Fails on purpose, saying whether trio is imported in this process (read from the row's error)."""
    import sys

    raise RuntimeError("trio present" if "trio" in sys.modules else "trio absent")
