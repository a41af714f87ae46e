"""The solution, but a seeded 30% of its decisions are a random suggestion or a noop."""

import random
from typing import Any

from warren_sim.scenarios.partners import Noisy, sibling_solution

solution = sibling_solution(__file__)


def factory(agent_id: str, role: str, briefing: dict[str, Any], rng: random.Random) -> Any:
    return Noisy(solution.make_policy(agent_id, role, briefing), rng, share=0.3)
