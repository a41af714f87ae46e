from warren_sim.runtime.clock import wall_seconds


class Buggy:
    """Sleeps twice, then raises with the wall-clock instant of the failure in its message."""

    def __init__(self):
        self.n = 0

    def decide(self, obs):
        self.n += 1
        if self.n >= 3:
            raise RuntimeError(f"injected crash at wall={wall_seconds():.6f}")
        return {"sleep_ms": 1000}


def make_policy(agent_id, role, briefing):
    return Buggy()
