"""warren_trips' forager: warren's own, going back to its patch until it has stored all its seeds."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

_WARREN = Path(__file__).resolve().parents[3] / "scenarios" / "warren" / "solution.py"
_spec = importlib.util.spec_from_file_location("warren_trips_base_solution", _WARREN)
assert _spec is not None and _spec.loader is not None
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)

TRIPS = re.compile(r"\((\d+) trips\)")


class TripForager(base.Forager):  # type: ignore[name-defined]
    __slots__ = ("left",)

    def __init__(self, notes: str) -> None:
        super().__init__(notes)
        found = TRIPS.search(notes)
        self.left = int(found.group(1)) if found else 1

    def decide(self, obs: Any) -> dict[str, Any]:
        answer: dict[str, Any] = super().decide(obs)
        if answer.get("action") == "store":  # warren's forager is done after one; this one after `left`
            self.left -= 1
            self.stored = self.left == 0  # type: ignore[misc]  # a slot of warren.Forager (loaded by path)
        return answer


def make_policy(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    return TripForager(briefing["notes"])
