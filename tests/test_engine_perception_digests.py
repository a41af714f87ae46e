"""What agents perceive, pinned: every observation object, text and affordances of whole runs, hashed.

The trace digests (tests/test_trace_digests.py) pin what a run records: commands, outcomes, events. They do not
pin what each agent is shown: the order of its events, the prose of an outcome built only when read, the
objectives it sees (shared between observations until one changes), the messages and events handed over at a
wake. Each digest below was taken by this file's ``perceived`` on main's engine and scenarios at e555a94, before
the second round of issue 14's engine work (the observation as the pending wake, outcome facts, events built
only when heard); a change of what an agent perceives must show up here as a new digest, deliberately committed
with its reason.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from warren_sim.engine import run_headless
from warren_sim.scenarios import instantiate, load_scenario

FAST = {("contention", "random", 0), ("relay", "random", 1), ("warren", "solution", 0), ("deadline", "random", 0)}
CASES = {
    ("bridge_repair", "solution", 0): "a64122278913d25412e9e67551527879ecfa7c50c9d7da21bf4583d653f92a46",
    ("bridge_repair", "solution", 1): "a64122278913d25412e9e67551527879ecfa7c50c9d7da21bf4583d653f92a46",
    ("bridge_repair", "random", 0): "4f97d024a8e5b2d6b6e9f0d6d2b6ca9852f278ba811724edc715efab500c60e1",
    ("bridge_repair", "random", 1): "fd92cedc62fe09efc8cc30baefd8f9debec0b47ce9ffe62ebec080f9b0cf6661",
    ("contention", "solution", 0): "f7010914cc85d7f71df2f549d8f2f9db95ac350969c2ac97411eb4ad6075576d",
    ("contention", "solution", 1): "6aaa7c113ef1522e3dbcf799e72119531d242b2a90cc5b1f6956122e269bd239",
    ("contention", "random", 0): "a85b6d510dee34984db2340c20d96393713eeacb8ad48a5dce0e903b6564935c",
    ("contention", "random", 1): "c5e0b3f88b869a302d759fc5b39895dd81fb1b3ca9a2398f5400f3b718e30e1f",
    ("deadline", "solution", 0): "28b6a0984f9a4ae001666738abd5a5905b923f1b08d6a3795097fbffcd82d48e",
    ("deadline", "solution", 1): "a9009e6921d05ac627f83117f6365ecd6f4723e031bf3858655f71e9fb800a92",
    ("deadline", "random", 0): "e165992fe90b6958fc691c324a956c4711f49421a5e4fd78039639f17c907b69",
    ("deadline", "random", 1): "dad36d0dabb9f098d58c1499a4be5536562623a9359936ff5845992a17b2df34",
    ("relay", "solution", 0): "3abb4a1f89367e228eec4d99abdb4a3c42307f15b625a53b4d896dd10fcfb5a0",
    ("relay", "solution", 1): "1d8b7b5b797bcb7def4098b42df622fe9e55c2a337bdee5a8402f8f9d5cec311",
    ("relay", "random", 0): "b3b65572f320977a3091b17f22b45321f7e7605c447b3d55ad4a9a7b64ad1804",
    ("relay", "random", 1): "496f02cad34bc6aaf20d6f47720b71b9ed5c776eb983449c309d8381c5aa0938",
    ("warren", "solution", 0): "203409879726b3abcf29e7d9245499ad9a4fcad1bd0c0e9b09494b713a0c2ddf",
    ("warren", "solution", 1): "203409879726b3abcf29e7d9245499ad9a4fcad1bd0c0e9b09494b713a0c2ddf",
    ("warren", "random", 0): "0053bb17667c7a15fc429e361e876d1bec0e1c1f217c0a34c575fb956cfbeca7",
    ("warren", "random", 1): "259db6d1c3ad2927b2aaeaae5db7b84f95103f1e08e88eaae1525cd2dc9c05eb",
}


class Reader:
    """Reads everything an agent is shown (object, text, affordances) into the hash, then lets the policy decide."""

    def __init__(self, policy: Any, digest: Any) -> None:
        self.policy, self.digest = policy, digest

    def decide(self, obs: Any) -> Any:
        self.digest.update(json.dumps(obs.observation, sort_keys=True, default=str).encode())
        self.digest.update(obs.text.encode())
        self.digest.update(json.dumps(obs.affordances, sort_keys=True).encode())
        return self.policy.decide(obs)


def perceived(scenario: str, policy: str, seed: int) -> str:
    digest = hashlib.sha256()
    sim, policies = instantiate(load_scenario(scenario, {}), seed, policy, record=False)
    run_headless(sim, {aid: Reader(p, digest) for aid, p in policies.items()})
    return digest.hexdigest()


@pytest.mark.parametrize(("scenario", "policy", "seed"), [
    case if case in FAST else pytest.param(*case, marks=pytest.mark.slow) for case in CASES])
def test_what_agents_perceive_is_unchanged(scenario: str, policy: str, seed: int) -> None:
    assert perceived(scenario, policy, seed) == CASES[(scenario, policy, seed)]


def test_the_lazy_view_is_the_observation() -> None:
    """Field by field, in the wire order, the view read first equals the whole object built after it."""
    sim, policies = instantiate(load_scenario("contention", {}), 0, "random", record=False)
    seen = 0
    while (batch := sim.advance()) is not None:
        for obs in batch.observations:
            view = obs.view
            fields = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in view.items()}
            assert list(fields) == list(obs.observation) and fields == obs.observation
            assert len(view) == len(obs.observation) and dict(view["place"]) == obs.observation["place"]
            sim.answer(obs.agent_id, {"noop": True})
            seen += 1
        sim.adjudicate()
        if seen > 200:
            break
    assert seen > 50


def test_the_forager_decides_the_same_from_the_view_and_from_the_plain_object() -> None:
    """In process the forager reads the lazy view; from the SDK, the plain ``observation`` dict: same choices."""

    class Plain:  # what the SDK hands a policy: attributes and the whole observation object, no view
        def __init__(self, obs: Any) -> None:
            self.agent_id, self.observation_id, self.time, self.reason = (obs.agent_id, obs.observation_id,
                                                                          obs.time, obs.reason)
            self.observation = obs.observation

    sim, policies = instantiate(load_scenario("warren", {"agents": 60}), 0, "solution", record=False)
    twins = {aid: type(p)(sim.world.agents[aid].notes) for aid, p in policies.items()}
    decided = 0
    while (batch := sim.advance()) is not None:
        for obs in batch.observations:
            plain = Plain(obs) if not (obs.reason == "start") else obs
            command = policies[obs.agent_id].decide(obs)
            assert twins[obs.agent_id].decide(plain) == command
            assert sim.validate(obs.agent_id, command) is None
            sim.answer(obs.agent_id, command)
            decided += 1
        sim.adjudicate()
    assert sim.status == "completed" and decided > 300
