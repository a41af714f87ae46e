"""The steward's first answer to each courier is a wrong code; asked again, it tells the right one
(hard on purpose: a courier must notice the door stays shut and ask again)."""

from typing import Any

from warren_sim.scenarios.partners import sibling_solution

solution = sibling_solution(__file__)


def wrong(code: str) -> str:
    """A code that is not ``code``: every digit one higher (9 becomes 0), or a suffix when it has no digit."""
    out = "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in code)
    return out if out != code else code + "-0"


class WrongFirst(solution.Steward):
    def __init__(self, agent_id: str, notes: str) -> None:
        super().__init__(agent_id, notes)
        self.told: set[str] = set()

    def decide(self, obs: Any) -> dict[str, Any]:
        decision: dict[str, Any] = super().decide(obs)
        if decision.get("action") == "tell":
            who = decision["args"]["to"]
            if who not in self.told:
                self.told.add(who)
                return {"action": "tell", "args": {"to": who, "text": f"The vault code is {wrong(self.code)}."}}
        return decision


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "steward":
        return WrongFirst(agent_id, briefing["notes"])
    return solution.make_policy(agent_id, role, briefing)
