"""echo: N agents, one in each cell of a square grid, and a run of ``steps`` ticks."""

from __future__ import annotations

import math
from typing import Any

TICK_MS = 1000


def expand(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    n, steps = params["agents"], params["steps"]
    side = max(2, math.isqrt(n - 1) + 1 + 1)  # every agent its own cell, and the hall's corner to spare
    width = len(str(n))
    agents = []
    for k in range(n):
        cell = k + 1  # cell 0 is the hall
        agents.append({"id": f"echo-{k + 1:0{width}d}", "role": "echo", "name": f"Echo {k + 1}",
                       "at": f"chamber:{cell % side},{cell // side}",
                       "notes": "Answer every observation at once: wait one tick."})
    space = data["spaces"][0]
    space["width"] = space["height"] = side
    data["agents"] = agents
    data["conventions"]["time_limit_ms"] = steps * TICK_MS
    return data
