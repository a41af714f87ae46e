"""The hands wait at the camp until the pump runs before they fetch a single sandbag."""

from typing import Any

from warren_sim.scenarios.partners import sibling_solution

solution = sibling_solution(__file__)


class Waiter(solution.Crew):
    def decide(self, obs: Any) -> dict[str, Any]:
        if solution._objective(obs.observation, "pump")["status"] == "pending":
            return {"sleep_ms": 5000}
        return super().decide(obs)


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "hand":
        return Waiter(agent_id, role)
    return solution.make_policy(agent_id, role, briefing)
