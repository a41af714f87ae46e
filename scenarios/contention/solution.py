"""Bundled policies for contention: potters share scarce tongs, and lose same-batch races gracefully.

The policy reaches for the *first* pair of tongs on the rack, as impatient potters do: when several
potters wake in the same batch they all ask for the same item, the seeded adjudication order gives it
to one of them, and the others' ``take`` comes back rejected. A loser wakes again (``interrupted``)
and tries another pair or waits; a potter who puts tongs back wakes the waiters with the ``dropped``
event. That is the conflict this scenario exists to show, and why it still completes.
"""

from __future__ import annotations

from typing import Any

WAIT_MS = 60_000


def _carrying(o: dict[str, Any], kind: str) -> list[str]:
    return [i["id"] for i in o["you"]["inventory"] if i["kind"] == kind]


def _here(o: dict[str, Any], kind: str) -> list[str]:
    return [i["id"] for i in o["place"]["items"] if i["kind"] == kind]


class Potter:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.fired_since_take = False

    def decide(self, obs: Any) -> dict[str, Any]:
        o = obs.observation
        if o["busy"]:
            return {"noop": True}  # walking or firing: let it finish
        pots, tongs = _carrying(o, "pot"), _carrying(o, "tongs")
        if tongs and (self.fired_since_take or not pots):
            self.fired_since_take = False
            return {"action": "drop", "args": {"item": tongs[0]}}  # etiquette: back on the rack
        if not pots:
            return {"sleep_ms": WAIT_MS * 10}  # all mine are fired; nothing left to do
        if o["you"]["place"] != "kiln":
            return {"action": "move_to", "args": {"dest": "kiln"}}
        if tongs:
            self.fired_since_take = True
            return {"action": "fire", "args": {"structure": "kiln", "item": pots[0]}}
        rack = _here(o, "tongs")
        if rack:
            return {"action": "take", "args": {"item": rack[0]}}  # everyone grabs the first pair
        return {"sleep_ms": WAIT_MS}  # someone dropping tongs wakes us (event)


def make_policy(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    return Potter(agent_id)
