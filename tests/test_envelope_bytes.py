"""A served envelope built cheaply is the same envelope: shared tool choices, bytes kept instead of dicts.

``Perceived`` shares every tool's choices (and the affordances, the ``tools`` field and the text's "You can"
line made from them) between the observations of a batch with the same signature; ``WireEnvelope.whole`` and
``shaped`` serialize a dict built for the purpose and keep only the bytes. Each is checked here against the
plain way of building the same thing, over whole runs of several scenarios (what each agent is shown is
pinned by tests/test_engine_perception_digests.py too).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from warren_sim.engine.perception import Perceived, _build_affordances, _tool_choices
from warren_sim.protocol.converter import converter
from warren_sim.protocol.models import Envelope
from warren_sim.runtime.views import BRIEFING_REVISION, WHOLE, WireEnvelope
from warren_sim.scenarios import instantiate, load_scenario

CASES = [("contention", "random", 0), ("relay", "random", 1), ("warren", "solution", 0), ("warren", "random", 2),
         ("bridge_repair", "random", 0)]


def _plain_envelope(env: WireEnvelope) -> dict[str, Any]:
    """The envelope as the converter makes it from the observation's kept parts (the schema's source)."""
    obs = env.obs
    return converter.unstructure(Envelope(env.run_id, obs.agent_id, obs.observation_id, obs.seq, obs.time,
                                          obs.reason, env.deadline_unix, BRIEFING_REVISION, obs.observation,
                                          obs.text, obs.affordances))


def _play(scenario: str, policy: str, seed: int, check: Any, params: dict[str, Any] | None = None,
          limit: int = 600) -> int:
    sim, policies = instantiate(load_scenario(scenario, params or {}), seed, policy, record=False)
    seen = 0
    while seen < limit and (batch := sim.advance()) is not None:
        for obs in batch.observations:
            check(sim, obs)
            sim.answer(obs.agent_id, policies[obs.agent_id].decide(obs))
            seen += 1
        sim.adjudicate()
    return seen


@pytest.mark.parametrize(("scenario", "policy", "seed"), CASES)
def test_shared_choices_are_each_agents_own(scenario: str, policy: str, seed: int) -> None:
    """Every tool's choices, read through the batch's shared ``Perceived``, equal the agent's own, computed
    tool by tool as validation does; so do the affordances made from them."""
    def check(sim: Any, obs: Any) -> None:
        agent = sim.world.agents[obs.agent_id]
        own = {t: _tool_choices(sim, agent, t) for t in agent.tools}
        assert obs.unavailable() == {t: why for t, (params, why) in own.items() if params is None}
        assert obs.choices() == {t: params for t, (params, _) in own.items() if params is not None}
        assert obs.affordances == _build_affordances(obs.choices())
        for t in agent.tools:
            assert obs.tool_choices(t) == own[t]

    assert _play(scenario, policy, seed, check) > 50


def test_a_batch_of_foragers_shares_a_handful_of_choices() -> None:
    """The point of sharing: 1,000 foragers waking together, most alike, build a few ``Perceived``."""
    sim, _ = instantiate(load_scenario("warren", {"agents": 1000}), 0, "solution", record=False)
    batch = sim.advance()
    assert batch is not None and len(batch.observations) == 1000
    shared = {id(obs._shared()) for obs in batch.observations}
    assert all(isinstance(obs._shared(), Perceived) for obs in batch.observations[:3])
    assert len(shared) <= 10, len(shared)


@pytest.mark.parametrize(("scenario", "policy", "seed"), CASES)
def test_whole_bytes_are_the_converters_envelope(scenario: str, policy: str, seed: int) -> None:
    """``whole()`` (a dict built field after field, serialized and dropped) gives the bytes of the converter's
    envelope, key order included, and keeps no observation dict; a narrowing gives the same parts."""
    def check(sim: Any, obs: Any) -> None:
        env = WireEnvelope("run-x", obs, 1_900_000_000.123456)
        body = orjson.dumps(env.whole())
        narrow = orjson.loads(orjson.dumps(env.shaped(("observation",))))
        text_only = orjson.loads(orjson.dumps(env.shaped(("text", "affordances"))))
        assert obs._lazy.get("observation") is None  # the bytes are kept, not the dict they were made from
        plain = _plain_envelope(env)  # builds (and keeps) the observation the plain way, after the bytes
        assert body == orjson.dumps(plain)
        assert env.shaped(("affordances", "text", "observation")) is env.whole()  # one serialization
        identity = {k: v for k, v in plain.items() if k not in WHOLE}
        assert narrow == {**identity, "observation": plain["observation"]}
        assert text_only == {**identity, "text": plain["text"], "affordances": plain["affordances"]}

    assert _play(scenario, policy, seed, check, limit=300) > 50


def test_the_direct_observation_is_the_views() -> None:
    """The whole observation built without the lazy view equals the view's fields read afterwards."""
    def check(sim: Any, obs: Any) -> None:
        direct = obs.observation_unkept()
        view = obs.view
        assert list(direct) == list(view)
        assert direct == {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in view.items()}

    assert _play("contention", "random", 0, check, limit=300) > 50
    assert _play("warren", "random", 1, check, params={"agents": 40}, limit=300) > 50
