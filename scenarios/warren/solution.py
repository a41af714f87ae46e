"""Bundled policies for warren: each forager reads its burrow, patch and shift from its notes.

A forager decides about seven times in a whole run (sleep until the shift, walk to the patch, take
the seed, walk to the larder, store it, walk home, sleep), whatever the size of the warren: the
policy does O(1) work per decision and keeps four fields (``__slots__``, so 100,000 of them stay small).
It reads its observation (``busy``, ``you``, ``objectives``, ``place.items``: the lazy view's fields, see
``fields``) at every wake but the first (see ``decide``).
"""

from __future__ import annotations

import re
from typing import Any

NOTES = re.compile(r"burrow is (\S+)\. .* patch at (\S+)\. Your shift starts at t=(\d+) ms")
FOREVER = 2**40  # ms: sleep out the rest of the run (the larder filling ends it)


def fields(obs: Any) -> Any:
    """The observation's fields: in process, the engine's lazy view (a field is built when read, so the four
    this policy reads are all it pays for); from the SDK or anywhere else, the plain ``observation`` dict."""
    view = getattr(obs, "view", None)
    return view if view is not None else obs.observation


class Forager:
    __slots__ = ("burrow", "patch", "shift", "stored")

    def __init__(self, notes: str) -> None:
        found = NOTES.search(notes)
        if found is None:
            raise ValueError(f"forager notes without burrow, patch and shift: {notes!r}")
        self.burrow, self.patch, self.shift = found.group(1), found.group(2), int(found.group(3))
        self.stored = False

    def decide(self, obs: Any) -> dict[str, Any]:
        # Loops that return on the first seed, not lists of seeds: the same choices, fewer calls per wake.
        t = obs.time
        if t < self.shift and obs.reason == "start":
            # Everyone wakes at t=0 in one batch, in its burrow with nothing in hand: answer without
            # reading the observation, so the engine never builds 100,000 of them at once (it builds
            # an observation only when a policy reads it).
            return {"sleep_ms": self.shift - t}
        try:  # fields(obs), inline (a try costs nothing when the view is there: in process, always)
            o = obs.view
        except AttributeError:
            o = None
        if o is None:
            o = obs.observation
        if o["busy"]:
            return {"noop": True}  # walking: let it finish
        you = o["you"]
        for item in you["inventory"]:
            if item["kind"] == "seed":
                if you["place"] == "larder":
                    self.stored = True
                    return {"action": "store", "args": {"structure": "larder", "item": item["id"]}}
                return {"action": "move_to", "args": {"dest": "larder"}}
        if self.stored or o["objectives"][0]["status"] != "pending":
            if you["cell"] != self.burrow:
                return {"action": "move_to", "args": {"dest": self.burrow}}
            return {"sleep_ms": FOREVER}
        if t < self.shift:
            return {"sleep_ms": self.shift - t}
        for item in o["place"]["items"]:
            if item["kind"] == "seed":
                return {"action": "take", "args": {"item": item["id"]}}
        if you["cell"] != self.patch:
            return {"action": "move_to", "args": {"dest": self.patch}}
        return {"sleep_ms": FOREVER}  # the patch is empty (someone took the seed): nothing to do


def make_policy(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    return Forager(briefing["notes"])


def score(summary: dict[str, Any], sim: Any) -> float:
    """Seeds in the larder (the objective's target is the number of foragers)."""
    return float(sim.world.structures["larder"].fields["food"])
