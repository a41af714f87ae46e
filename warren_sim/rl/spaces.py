"""The spaces and the per-agent observations, infos and seeds both environments share.

An observation is a ``Dict``: ``text`` (the envelope's text in printable ASCII, cut to ``max_text``),
``action_mask`` (``int8``, ``max_actions + 1`` long; 1 where the index is a suggestion, always 1 at
0 = noop) and ``features`` (``float32``: time as a fraction of the limit, busy 0/1, inventory size,
objectives' progress). An agent that did not wake has only the noop unmasked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from .driver import FEATURES, TEXT_CHARSET, Driver, clean_text


def observation_space(max_actions: int, max_text: int, capacity: int) -> spaces.Dict:
    return spaces.Dict({
        "text": spaces.Text(max_text, min_length=1, charset=TEXT_CHARSET),
        "action_mask": spaces.Box(0, 1, shape=(max_actions + 1,), dtype=np.int8),
        "features": spaces.Box(np.zeros(len(FEATURES), dtype=np.float32),
                               np.array([1.0, 1.0, float(capacity), 1.0], dtype=np.float32), dtype=np.float32),
    })


def action_space(max_actions: int) -> spaces.Discrete:
    return spaces.Discrete(max_actions + 1)


def observe(driver: Driver, agent_id: str, max_text: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One controlled agent's observation and info as of the driver's current batch (or the end)."""
    mask = np.zeros(driver.max_actions + 1, dtype=np.int8)
    mask[0] = 1
    features = np.asarray(driver.features(agent_id), dtype=np.float32)
    obs = driver.awake.get(agent_id)
    if obs is None:
        text = driver.idle_text(agent_id)
        info: dict[str, Any] = {"awake": False, "reason": None, "observation": None, "suggestions": [],
                                "text": text}
        return {"text": clean_text(text, max_text), "action_mask": mask, "features": features}, info
    options = driver.choices[agent_id]
    mask[1:len(options) + 1] = 1
    text = obs.text
    info = {"awake": True, "reason": obs.reason, "observation_id": obs.observation_id,
            "observation": obs.observation, "suggestions": options, "text": text}
    return {"text": clean_text(text, max_text), "action_mask": mask, "features": features}, info


def next_seed(rng: np.random.Generator) -> int:
    """The engine seed of an episode started by ``reset()`` without a seed, drawn from the env's generator."""
    return int(rng.integers(2**31 - 1))
