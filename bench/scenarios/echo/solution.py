"""echo's policy: every observation answered with one tick of sleep (the trivial answer of an echo step)."""

from __future__ import annotations

from typing import Any

ANSWER = {"sleep_ms": 1000}


class Echo:
    __slots__ = ()

    def decide(self, obs: Any) -> dict[str, Any]:
        return dict(ANSWER)


def make_policy(agent_id: str, role: str, briefing: dict[str, Any]) -> Any:
    return Echo()
