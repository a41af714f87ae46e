"""Traces pinned byte for byte: every bundled scenario, several seeds, the solution and the random policies.

The engine is optimised (lazy observations, outcome texts built only when perceived, adjudication trusting
what validation checked); none of that may change what a run records. Each case's SHA-256 was taken from
``warren run SCENARIO --seed N --trace`` (the same bytes as below) before those changes; a change of
behaviour must show up here as a new digest, deliberately committed with its reason.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest

from warren_sim.engine import layout, run_headless
from warren_sim.engine.records import TraceWriter, dumps_record
from warren_sim.scenarios import instantiate, load_scenario

CASES = [
    ('bridge_repair', 0, 'solution', {}, "e4ac5d32412b185a0ada6e939b0d95d0ca8b44b18d59bddd392b7afae26e452a"),
    ('bridge_repair', 1, 'solution', {}, "ff21b7ff24ce5c21d00e27173692f5d918732c263da61ab1e44dddf15cfc754a"),
    ('bridge_repair', 2, 'solution', {}, "7ab18bcd1b59b70be1a0a2690ef0a0bfca6ba0ca08032c3b0be356c8334ad962"),
    ('bridge_repair', 0, 'random', {}, "7329ffd3906259d16ccababbebb7e7b00ade8a879dde88e772df641bcdb66cf7"),
    ('bridge_repair', 1, 'random', {}, "27ef33f1a8541c2aa385856f96d8ec40de140961c50ea5cc0ca93db802307092"),
    ('bridge_repair', 2, 'random', {}, "514b215f7cd9783a55636b517b04e0bb336c3e9f0c11301ef977640650e9fc0e"),
    ('contention', 0, 'solution', {}, "5aa4f686898555a9dae78bac33a9a677625150232084f77ecbcc38de6815c656"),
    ('contention', 1, 'solution', {}, "386ea227c9985e916a312674c47a96c29c36d0c2cce01207dd2dc19d25334161"),
    ('contention', 2, 'solution', {}, "fee26314f8dff642ea41a58a3bf182a9f245c590c93054e5d781245fa4c87a6d"),
    ('contention', 0, 'random', {}, "46e1f48e2443e3bdd3a0af7558196d4cbff3a76f9bb0dd024836cd9c1b163f78"),
    ('contention', 1, 'random', {}, "afe8a03dde62221cfd5ebe89d98f4fad28765e49f7678327cf7c12d77127a9a7"),
    ('contention', 2, 'random', {}, "04557256736855d3a22122323a3fb4f257ba3a04e5492d979902e29a222ccd1c"),
    ('deadline', 0, 'solution', {}, "de43c7e05f2176c803b3f719f79c1266e42f07934f110b8d17c2d3667739b973"),
    ('deadline', 1, 'solution', {}, "3cb342ba2f5503953b039c3655c2ba6a59d74d7ee3bccc9cb3cca017e6597ad1"),
    ('deadline', 2, 'solution', {}, "f7bf90d01e053ac622a8d7a4def00611538a5116b76f0248e45312e7609cc2f7"),
    ('deadline', 0, 'random', {}, "ce199ce6cb2bab48f62b92ae1bbd996ffcd0b1cc80e397a72762546d73b66e0c"),
    ('deadline', 1, 'random', {}, "8080da4ddf6642cad2e6e9a7b46ce5fd133267ae1e4a92df53a5814bd3124704"),
    ('deadline', 2, 'random', {}, "b6a95e6000b3ac54fe71a9f2acb30a73875a279fdf59f907d0b3a517fbb92d92"),
    ('relay', 0, 'solution', {}, "55e08c0875ef255c47150de049d7c300bb330ec54a9907a5ee7f96f9555816bf"),
    ('relay', 1, 'solution', {}, "904b41cccad10c34aab03871666c5e53da712858bd73536b44e1444e4bcf32f0"),
    ('relay', 2, 'solution', {}, "ffa36bc595e32c8f187c6cd8841a3a13886b0dd7f2bb381a794223083ccd3aa6"),
    ('relay', 0, 'random', {}, "e3d2175995ac2eefe5d7fedf833a96b7fddd4d9e6999a7b8e9edd2e210c8b2f5"),
    ('relay', 1, 'random', {}, "16653d2f369bb1c04f447fef1899720c382c264a4e3a40cc5188174bdcfc8977"),
    ('relay', 2, 'random', {}, "c5d3c605dd08a5d43d6ef2c1ac6450465acf2ec73b48b3a7c9b67b1863f161f4"),
    ('warren', 0, 'solution', {}, "b7906a83c2ffa8e4747821c0da2d2345e347c5bc8f5727882eea4315aa6bcdda"),
    ('warren', 1, 'solution', {}, "2429f386abc5c02b599faad1a741d5e1a218aaad6224695f6978a23dcc851b74"),
    ('warren', 2, 'solution', {}, "925056ced1210c8d911fb7108cf4d18cc24c3f07d3aa9b1bcee7ccfdb02eed01"),
    pytest.param('warren', 0, 'random', {}, "e7312822c120b3b059b4ff5ff6dfa620755ae31dafff5f5e851094e753fa6d21", marks=pytest.mark.slow),
    pytest.param('warren', 1, 'random', {}, "e12391497e98665a0b1c44fe87e1375e697f1217c907bcc1baccf035f780738a", marks=pytest.mark.slow),
    pytest.param('warren', 2, 'random', {}, "d7476f9e3e066d937b5009516ef2d9b30c27b4866afcca7009de7054ea706417", marks=pytest.mark.slow),
    ('warren', 5, 'solution', {'agents': 200}, "4c0c2de0a31763233e6f19d9ff1248752fb25c135ad0821e9dd6d6dcbcf09c74"),
    ('contention', 3, 'solution', {'potters': 12, 'tongs': 6, 'pots': 6}, "0447d34373aced57b850ba1ad61877c5ae6ffb10ba96ae270ed5fe8e209d09d1"),
    ('contention', 4, 'random', {'potters': 12, 'tongs': 3}, "4580fb0415aa309258374e2df5b69318126827253664a48739fc32887064a329"),
    ('warren', 3, 'random', {'agents': 20}, "ceae37bcb8caa4bfbe9e58acd93ae6ea4572c829613625293374b65da39217e9"),
    ('relay', 7, 'random', {}, "38d3086b3a9c46584eb3794f608cb0b1d45cba9553f5e58a36afa8703db1af08"),
]


def trace(scenario: str, seed: int, policy: str, params: dict[str, Any]) -> str:
    """The JSON Lines trace ``warren run --trace`` writes for this run."""
    sim, policies = instantiate(load_scenario(scenario, params), seed, policy)
    out = io.StringIO()
    writer = TraceWriter(out)
    run_headless(sim, policies, on_batch=lambda s: writer.write(s.drain_records()))
    writer.write(sim.drain_records())
    return out.getvalue()


@pytest.mark.parametrize(("scenario", "seed", "policy", "params", "digest"), CASES)
def test_the_trace_is_byte_identical_to_the_pinned_one(scenario: str, seed: int, policy: str,
                                                       params: dict[str, Any], digest: str) -> None:
    """The run's trace hashes to the digest recorded before the engine's optimisations."""
    text = trace(scenario, seed, policy, params)
    assert text.endswith("\n") and '"kind":"end"' in text.splitlines()[-1]
    # The run record's `layout` (what a viewer draws, docs/viewer.md) was added after these digests were taken;
    # it is the scenario's, checked here against the engine's layout of a fresh world, and the rest of the
    # trace must still hash to the pinned digest.
    first, rest = text.split("\n", 1)
    run = json.loads(first)
    fresh, _ = instantiate(load_scenario(scenario, params), seed, policy)
    assert run.pop("layout") == layout(fresh.world, fresh.spec)
    assert hashlib.sha256((dumps_record(run) + "\n" + rest).encode()).hexdigest() == digest


def test_a_trace_without_records_still_decides_the_same() -> None:
    """``record=False`` (the benchmark's and ``warren eval``'s mode) ends the same way as a recorded run."""
    recorded, policies = instantiate(load_scenario("warren", {"agents": 50}), 4, "solution", record=True)
    bare, bare_policies = instantiate(load_scenario("warren", {"agents": 50}), 4, "solution", record=False)
    assert run_headless(recorded, policies) == run_headless(bare, bare_policies)
    assert bare.records == []
