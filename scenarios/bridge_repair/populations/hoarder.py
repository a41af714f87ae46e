"""The carriers first take the planks from the sawmill and stash them at the depot (hard on purpose:
an engineer that only looks for planks at the sawmill never finds them; this population's own engineer does)."""

from typing import Any

from warren_sim.scenarios.partners import sibling_solution

solution = sibling_solution(__file__)


class Stasher:
    """A carrier that moves every plank it can get from the sawmill to the depot, then carries medkits."""

    def __init__(self, agent_id: str, base: Any) -> None:
        self.base = base
        self.stashed = False

    def decide(self, obs: Any) -> dict[str, Any]:
        if not self.stashed:
            place = obs.observation["you"]["place"]
            planks = solution._carrying(obs, "plank")
            if place == "sawmill" and solution._here(obs, "plank"):
                return solution._take(obs, "plank")
            if planks:
                if place == "depot":
                    return {"action": "drop", "args": {"item": planks[0]}}
                return solution._go(obs, "depot")
            if place != "sawmill" and solution._objective(obs, "repair")["status"] != "completed":
                return solution._go(obs, "sawmill")
            self.stashed = True  # the sawmill is empty (or the bridge holds): carry medkits as usual
        return self.base.decide(obs)


class Seeker(solution.Engineer):
    """The solution's engineer, who also looks for planks at the depot when the sawmill has none."""

    def decide(self, obs: Any) -> dict[str, Any]:
        o = obs.observation
        repairing = any(b["action"] == "repair" for b in o["busy"])
        done = solution._objective(obs, "repair")["status"] == "completed"
        planks = solution._carrying(obs, "plank")
        if not repairing and not done and solution._carrying(obs, "toolbox") and not planks:
            here = solution._take(obs, "plank")
            if here is not None:
                return here
            if o["you"]["place"] == "sawmill":
                return solution._go(obs, "depot")
            if o["you"]["place"] == "depot":
                return {"sleep_ms": 5000}  # the stashers are on their way with the planks
        return super().decide(obs)


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    if role == "engineer":
        return Seeker(agent_id)
    return Stasher(agent_id, solution.make_policy(agent_id, role, briefing))
