"""The steward answers no message; it says the code aloud at the manor every 30 s (hard on purpose:
a courier that waits for a reply never gets one; one that walks to the manor hears it)."""

from typing import Any

from warren_sim.scenarios.partners import sibling_solution

solution = sibling_solution(__file__)


class Mumbler(solution.Steward):
    def decide(self, obs: Any) -> dict[str, Any]:
        if obs.reason == "timer" or obs.reason == "start":
            return {"action": "say", "args": {"text": f"(to nobody) The vault code is {self.code}."}}
        return {"sleep_ms": 30_000}


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "steward":
        return Mumbler(agent_id, briefing["notes"])
    return solution.make_policy(agent_id, role, briefing)
