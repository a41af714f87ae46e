"""warren: burrows on a diamond around the larder, one forager and one seed each, shifts by distance.

Deterministic given the parameters: burrows are taken ring by ring (Manhattan distance 2, 4, 6...
from the larder, cells of a ring in a fixed order), so the N-th forager's burrow never depends on
anything but N; ``layout`` only permutes which forager id lives in which burrow, with its own
``random.Random(layout)``. The cost is O(agents) and no sorting.
"""

from __future__ import annotations

import random
from typing import Any

CROWD = 8  # foragers at the larder at a time, about: the shifts are spaced for it
STEP_MS = 1000
TICK_MS = 1000
MARGIN_MS = 120_000


def burrows(n: int) -> tuple[int, list[tuple[int, int, int]]]:
    """``(radius, [(distance, dx, dy) ...])``: the first n burrow offsets from the larder, nearest first.

    Burrows sit on even rings only, so every burrow's east neighbour (its patch) lies on an odd ring:
    no patch is a burrow, no two burrows share a patch, and nothing lands on the larder.
    """
    out: list[tuple[int, int, int]] = []
    d = 0
    while len(out) < n:
        d += 2
        ring = []
        for dy in range(-d, d + 1):
            span = d - abs(dy)
            ring.append((dy, -span))
            if span:
                ring.append((dy, span))
        for dy, dx in ring:  # north to south, west before east: a fixed order
            if len(out) == n:
                break
            out.append((d, dx, dy))
    return d, out


def expand(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    n, layout = params["agents"], params["layout"]
    radius, offsets = burrows(n)
    side = 2 * (radius + 1) + 1  # the diamond and its patches (one step further east) fit inside
    c = side // 2
    width = len(str(n))
    ids = [f"forager-{k:0{width}d}" for k in range(1, n + 1)]
    if layout:
        random.Random(layout).shuffle(ids)
    agents, items = [], []
    shift = 0
    last_trip = 0
    for k, (d, dx, dy) in enumerate(offsets):
        aid = ids[k]
        burrow = f"warren:{c + dx},{c + dy}"
        patch = f"warren:{c + dx + 1},{c + dy}"
        seed = f"seed-{aid.removeprefix('forager-')}"
        agents.append({
            "id": aid, "role": "forager", "name": f"Forager {aid.removeprefix('forager-').lstrip('0') or '0'}",
            "at": burrow,
            "notes": (f"Your burrow is {burrow}. Your seed ({seed}) lies in your patch at {patch}. "
                      f"Your shift starts at t={shift} ms: sleep until then, so the tunnel by the larder "
                      "does not jam. Then fetch your seed, store it in the larder, and go home to your burrow."),
        })
        items.append({"id": seed, "kind": "seed", "name": "a seed", "at": patch})
        # At the larder from arrival to home: the store's tick and the walk home (d steps).
        at_larder_ms = TICK_MS + d * STEP_MS
        last_trip = shift + 3 * TICK_MS + (2 * d + 2) * STEP_MS + at_larder_ms
        shift += max(1, at_larder_ms // CROWD)
    data["conventions"]["time_limit_ms"] = last_trip + MARGIN_MS
    space = data["spaces"][0]
    space["width"] = space["height"] = side
    larder = data["places"][0]
    larder["x"] = larder["y"] = c
    data["agents"] = agents
    data["items"] = items
    objective = data["objectives"][0]
    objective["target"] = n
    objective["description"] = f"Store all {n} seeds in the larder." if n > 1 else "Store the seed in the larder."
    return data
