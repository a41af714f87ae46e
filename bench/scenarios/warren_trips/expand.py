"""warren_trips: ``warren``'s world (its own expand), with ``seeds`` seeds in each forager's patch.

Each forager's notes say how many trips to make; the objective's target and the time limit grow with them.
The extra seeds are ``seed-<n>-2`` ... ``seed-<n>-<seeds>`` next to warren's ``seed-<n>``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_WARREN = Path(__file__).resolve().parents[3] / "scenarios" / "warren" / "expand.py"
_spec = importlib.util.spec_from_file_location("warren_trips_base_expand", _WARREN)
assert _spec is not None and _spec.loader is not None
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)

ONE_TRIP = "Then fetch your seed, store it in the larder, and go home to your burrow."


def expand(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    seeds = params["seeds"]
    data = base.expand(data, params)
    extra = []
    for agent, item in zip(data["agents"], list(data["items"]), strict=True):
        agent["notes"] = agent["notes"].replace(
            ONE_TRIP, f"Then fetch your {seeds} seeds one at a time, storing each in the larder ({seeds} trips), "
                      "and go home to your burrow.")
        extra += [{**item, "id": f"{item['id']}-{j}"} for j in range(2, seeds + 1)]
    data["items"] += extra
    n = len(data["agents"])
    radius, _ = base.burrows(n)
    # each further trip, for the farthest forager: patch -> larder -> patch, the take and the store
    trip_ms = 3 * base.TICK_MS + (2 * radius + 4) * base.STEP_MS
    data["conventions"]["time_limit_ms"] += (seeds - 1) * trip_ms * (1 + n // base.CROWD)
    objective = data["objectives"][0]
    objective["target"] = n * seeds
    objective["description"] = f"Store all {n * seeds} seeds in the larder."
    return data
