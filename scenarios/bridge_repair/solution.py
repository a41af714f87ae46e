"""Bundled policies for bridge_repair: they complete the scenario from any state they wake in.

Each policy is reactive: it reads the observation (never hidden state), so it works headless, as
an NPC in a served run, and remotely through the SDK after a reconnect.
"""

from __future__ import annotations

from typing import Any


def _afford(obs: Any, action: str) -> dict[str, Any] | None:
    for a in obs.affordances:
        if a["action"] == action:
            return a
    return None


def _carrying(obs: Any, kind: str) -> list[str]:
    return [i["id"] for i in obs.observation["you"]["inventory"] if i["kind"] == kind]


def _here(obs: Any, kind: str) -> list[str]:
    return [i["id"] for i in obs.observation["place"]["items"] if i["kind"] == kind]


def _objective(obs: Any, oid: str) -> dict[str, Any]:
    return next(o for o in obs.observation["objectives"] if o["id"] == oid)


def _go(obs: Any, place: str) -> dict[str, Any]:
    if obs.observation["busy"] and obs.observation["busy"][0]["args"].get("dest") == place:
        return {"noop": True}
    return {"action": "move_to", "args": {"dest": place}}


def _take(obs: Any, kind: str) -> dict[str, Any] | None:
    options = _here(obs, kind)
    if not options:
        return None
    # Spread the choice by agent id so that two carriers rarely want the same item; when they do,
    # the seeded adjudication order decides and the loser simply picks again at its next wake.
    pick = options[sum(map(ord, obs.agent_id)) % len(options)]
    return {"action": "take", "args": {"item": pick}}


class Engineer:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.announced = False

    def decide(self, obs: Any) -> dict[str, Any]:
        o = obs.observation
        if any(b["action"] == "repair" for b in o["busy"]):
            return {"noop": True}
        if _objective(obs, "repair")["status"] == "completed":
            if not self.announced:
                self.announced = True
                return {"action": "say", "args": {"text": "The bridge is repaired: the way to the clinic is open."}}
            return {"sleep_ms": 60_000}
        if not _carrying(obs, "toolbox"):
            return _take(obs, "toolbox") or _go(obs, "workshop")
        planks = _carrying(obs, "plank")
        if not planks:
            return _take(obs, "plank") or _go(obs, "sawmill")
        if len(planks) < 2 and o["you"]["place"] == "sawmill" and _here(obs, "plank"):
            return _take(obs, "plank")  # carry both planks in one trip
        repair = _afford(obs, "repair")
        if repair is not None:
            return {"action": "repair", "args": dict(repair["suggestions"][0])}
        return _go(obs, "bridge")


class Carrier:
    """Courier and medic: carry medkits to the clinic store once the bridge holds."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id

    def decide(self, obs: Any) -> dict[str, Any]:
        o = obs.observation
        resupply = _objective(obs, "resupply")
        if resupply["status"] == "completed":
            return {"sleep_ms": 60_000}
        medkits = _carrying(obs, "medkit")
        deliver = _afford(obs, "deliver")
        if medkits and deliver is not None:
            return {"action": "deliver", "args": dict(deliver["suggestions"][0])}
        if not medkits:
            if o["you"]["place"] == "depot" or _here(obs, "medkit"):
                took = _take(obs, "medkit")
                if took:
                    return took
                if o["you"]["place"] == "depot":
                    return {"sleep_ms": 60_000}  # the depot is empty: the others carry the rest
            return _go(obs, "depot")
        if o["you"]["place"] == "depot" and _here(obs, "medkit") and len(medkits) < 2:
            took = _take(obs, "medkit")
            if took:
                return took
        if _objective(obs, "repair")["status"] != "completed":
            if o["you"]["place"] == "bridge":
                return {"sleep_ms": 20_000}  # wait at the bridge; the engineer's news wakes us
            return _go(obs, "bridge")
        return _go(obs, "clinic")


def make_policy(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "engineer":
        return Engineer(agent_id)
    return Carrier(agent_id)
