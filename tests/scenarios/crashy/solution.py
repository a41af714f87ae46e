class Buggy:
    def __init__(self):
        self.n = 0

    def decide(self, obs):
        self.n += 1
        if self.n >= 3:
            raise RuntimeError("policy bug on purpose")
        return {"sleep_ms": 1000}


def make_policy(agent_id, role, briefing):
    return Buggy()
