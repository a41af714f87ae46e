"""Every hand keeps the first sandbag it picks up and never stacks it, so it carries one bag a trip
and the others must stack every remaining bag."""

from typing import Any

from warren_sim.scenarios.partners import sibling_solution

solution = sibling_solution(__file__)


class Keeper(solution.Crew):
    def __init__(self, agent_id: str, role: str) -> None:
        super().__init__(agent_id, role)
        self.kept: str | None = None

    def _levee(self, o: dict[str, Any], agent_id: str) -> dict[str, Any]:
        if solution._objective(o, "levee")["status"] != "pending":
            return {"sleep_ms": solution.LONG_SLEEP}
        bags = solution._carrying(o, "sandbag")
        if self.kept is None and bags:
            self.kept = bags[0]
        others = [b for b in bags if b != self.kept]
        place = o["you"]["place"]
        if others and place == "levee":
            return {"action": "stack", "args": {"structure": "levee", "item": others[0]}}
        here = solution._here(o, "sandbag")
        if place == "quarry" and here and len(bags) < o["you"]["capacity"]:
            return {"action": "take", "args": {"item": here[sum(map(ord, agent_id)) % len(here)]}}
        if others:
            return solution._go(o, "levee")
        if place == "quarry":
            return {"sleep_ms": solution.LONG_SLEEP}
        return solution._go(o, "quarry")


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "hand":
        return Keeper(agent_id, role)
    return solution.make_policy(agent_id, role, briefing)
