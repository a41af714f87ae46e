"""Each carrier leaves its first medkit at the bridge and says so (tell) to the team; whoever
reads the message picks it up there (hard on purpose: the medkit is nowhere a policy that reads no
message looks)."""

from typing import Any

from warren_sim.scenarios.partners import sibling_solution

solution = sibling_solution(__file__)


class Dropper:
    def __init__(self, agent_id: str, base: Any, team: list[str]) -> None:
        self.agent_id, self.base, self.team = agent_id, base, team
        self.dropped = False
        self.to_tell: list[str] = []

    def decide(self, obs: Any) -> dict[str, Any]:
        if self.to_tell:
            who = self.to_tell.pop(0)
            return {"action": "tell", "args": {"to": who, "text": "I left a medkit at the bridge."}}
        medkits = solution._carrying(obs, "medkit")
        if not self.dropped and medkits and obs.observation["you"]["place"] == "bridge":
            self.dropped = True
            self.to_tell = list(self.team)
            return {"action": "drop", "args": {"item": medkits[0]}}
        if self.dropped and obs.observation["you"]["place"] == "bridge" and solution._here(obs, "medkit"):
            return {"sleep_ms": 60_000}  # it is not picking its own medkit up again
        return self.base.decide(obs)


def factory(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    base = solution.make_policy(agent_id, role, briefing)
    if role == "engineer":
        return base
    team = [a for a in ("engineer-1", "courier-1", "medic-1") if a != agent_id]
    return Dropper(agent_id, base, team)
