"""Gymnasium ids for WARREN's scenarios: ``warren/<CamelCaseName>-v0``, one per scenario found.

Registered when ``warren_sim.rl`` is imported (Gymnasium 1.x has no plugin entry points; its
``make("module:id")`` form imports the module first). Keyword arguments of ``gymnasium.make`` go to
:func:`warren_sim.rl.single.gym_env`: ``agent``, ``seed``, ``max_actions``, scenario parameters...
"""

from __future__ import annotations

from ..scenarios import list_scenarios

NAMESPACE = "warren"


def env_id(scenario: str) -> str:
    """``bridge_repair`` -> ``warren/BridgeRepair-v0``."""
    camel = "".join(part[:1].upper() + part[1:] for part in scenario.replace("-", "_").split("_") if part)
    return f"{NAMESPACE}/{camel}-v0"


def register_envs() -> list[str]:
    """Register every known scenario's id (idempotent); the ids."""
    from gymnasium.envs.registration import register, registry

    ids = []
    for name in list_scenarios():
        eid = env_id(name)
        if eid not in registry:
            register(id=eid, entry_point="warren_sim.rl.single:WarrenGymEnv", kwargs={"scenario": name},
                     nondeterministic=False)
        ids.append(eid)
    return ids
