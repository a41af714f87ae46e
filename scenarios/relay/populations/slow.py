"""Everyone thinks 20 s before each action; the steward's answer and the couriers' walks come late."""

from typing import Any

from warren_sim.scenarios.partners import Slow, sibling_solution

solution = sibling_solution(__file__)


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    return Slow(solution.make_policy(agent_id, role, briefing), pause_ms=20_000)
