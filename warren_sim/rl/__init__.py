"""WARREN for RL users: a PettingZoo ``ParallelEnv`` and a Gymnasium ``Env`` over the in-process engine.

Needs the optional extra ``pip install 'warren-sim[rl]'`` (pettingzoo, gymnasium, numpy). Importing
this package registers one Gymnasium id per scenario (``warren/BridgeRepair-v0``, ...), so
``gymnasium.make("warren/BridgeRepair-v0")`` works after ``import warren_sim.rl``, and
``gymnasium.make("warren_sim.rl:warren/BridgeRepair-v0")`` works without it (Gymnasium imports the
module named before the colon). PettingZoo itself is imported only when ``parallel_env`` is called.
See docs/rl.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .driver import COMPLETION_BONUS, FEATURES
from .registry import env_id, register_envs

if TYPE_CHECKING:
    from .parallel import WarrenParallelEnv
    from .single import WarrenGymEnv

__all__ = ["COMPLETION_BONUS", "FEATURES", "env_id", "gym_env", "parallel_env", "register_envs"]


def _need(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ImportError(f"warren_sim.rl needs {module}: install the extra with pip install 'warren-sim[rl]'")


def parallel_env(scenario: str, seed: int | None = None, controlled: Iterable[str] | None = None,
                 max_actions: int = 64, **params: Any) -> WarrenParallelEnv:
    """A PettingZoo ``ParallelEnv`` of ``scenario``; see :func:`warren_sim.rl.parallel.parallel_env`."""
    _need("pettingzoo")
    from .parallel import parallel_env as make

    return make(scenario, seed, controlled, max_actions, **params)


def gym_env(scenario: str, agent: str | None = None, seed: int | None = None, max_actions: int = 64,
            **kwargs: Any) -> WarrenGymEnv:
    """A Gymnasium ``Env`` for one agent of ``scenario``; see :func:`warren_sim.rl.single.gym_env`."""
    from .single import gym_env as make

    return make(scenario, agent, seed, max_actions, **kwargs)


register_envs()
