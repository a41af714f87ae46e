"""Bundled policies for relay: the code travels by message, and the policies read it from messages.

The steward answers every courier that asks with ``tell`` ("The vault code is 4721."); a courier asks
once, walks to the vault door meanwhile, and reads the code out of ``observation["messages"]``. The
code lives only in the steward's notes, so no policy can open the door without the exchange.
"""

from __future__ import annotations

import re
from typing import Any

CODE_IN_TEXT = re.compile(r"code is ([A-Za-z0-9-]+)")
STEWARD = "steward-1"
LONG_SLEEP = 600_000


def _objective(o: dict[str, Any], oid: str) -> dict[str, Any]:
    return next(x for x in o["objectives"] if x["id"] == oid)


def _go(o: dict[str, Any], place: str) -> dict[str, Any]:
    for b in o["busy"]:
        if b["action"] == "move_to" and b["args"].get("dest") == place:
            return {"noop": True}  # already on the way
    return {"action": "move_to", "args": {"dest": place}}


class Steward:
    """Answers whoever asks for the code, one direct message per wake."""

    def __init__(self, agent_id: str, notes: str) -> None:
        found = CODE_IN_TEXT.search(notes)
        self.code = found.group(1) if found else ""
        self.to_answer: list[str] = []

    def decide(self, obs: Any) -> dict[str, Any]:
        for m in obs.observation["messages"]:
            if "code" in m["text"].lower() and m["from"] not in self.to_answer:
                self.to_answer.append(m["from"])
        if self.to_answer and self.code:
            who = self.to_answer.pop(0)
            return {"action": "tell", "args": {"to": who, "text": f"The vault code is {self.code}."}}
        return {"sleep_ms": LONG_SLEEP}  # a message wakes us


class Courier:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.code: str | None = None
        self.asked = False

    def decide(self, obs: Any) -> dict[str, Any]:
        o = obs.observation
        for m in o["messages"]:
            found = CODE_IN_TEXT.search(m["text"])
            if found:
                self.code = found.group(1)
        if _objective(o, "bank")["status"] == "completed":
            return {"sleep_ms": LONG_SLEEP}
        if any(b["action"] == "unlock" for b in o["busy"]):
            return {"noop": True}
        place = o["you"]["place"]
        if _objective(o, "open")["status"] != "completed":
            if self.code is None and not self.asked:
                self.asked = True  # the voice lane: asking does not stop a walk
                return {"action": "tell", "args": {"to": STEWARD, "text": "What is the vault code, please?"}}
            if place != "vault-door":
                return _go(o, "vault-door")
            if self.code is None:
                return {"sleep_ms": LONG_SLEEP}  # the steward's answer wakes us
            return {"action": "unlock", "args": {"structure": "door", "code": self.code}}
        gold = [i["id"] for i in o["you"]["inventory"] if i["kind"] == "gold"]
        here = [i["id"] for i in o["place"]["items"] if i["kind"] == "gold"]
        if place == "strongroom" and here and len(gold) < 2:
            # Spread picks by id so two couriers rarely want the same bar; a lost race just retries.
            return {"action": "take", "args": {"item": here[sum(map(ord, self.agent_id)) % len(here)]}}
        if gold:
            if place == "bank":
                return {"action": "deposit", "args": {"structure": "bank", "item": gold[0]}}
            return _go(o, "bank")
        if place == "strongroom":
            return {"sleep_ms": LONG_SLEEP}  # the strongroom is empty: the others carry the rest
        return _go(o, "strongroom")


def make_policy(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "steward":
        return Steward(agent_id, briefing["notes"])
    return Courier(agent_id)
