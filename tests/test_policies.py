"""The policy protocol: --policy resolution, teaching errors, the documented example, answer-or-noop."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from server_helpers import served

from warren_sim.cli import main
from warren_sim.engine import run_headless
from warren_sim.engine.headless import answer_or_noop
from warren_sim.scenarios import PolicyError, instantiate, load_scenario, resolve_policy
from warren_sim.scenarios.policies import CONTRACT

ROOT = Path(__file__).resolve().parents[1]
PY = [sys.executable, "-m", "warren_sim.cli"]


def doc_example() -> str:
    """The example policy of docs/policies.md: the python block after the '## An example' heading."""
    text = (ROOT / "docs" / "policies.md").read_text(encoding="utf-8")
    section = text[text.index("## An example"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_example_is_15_lines_and_runs_headless_from_the_current_directory(tmp_path):
    """docs/policies.md's example, saved as ./mypolicy.py, runs `warren run --policy mypolicy:factory` to the end."""
    code = doc_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 15
    (tmp_path / "mypolicy.py").write_text(code, encoding="utf-8")
    out = subprocess.run([*PY, "run", "bridge_repair", "--seed", "3", "--policy", "mypolicy:factory", "--trace",
                          "t.jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr
    assert out.stdout.startswith("bridge_repair seed 3: failed (the scenario's time limit")  # as the doc says
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    commands = [r for r in records if r["kind"] == "command"]
    assert any("action" in r["command"] for r in commands) and not [r for r in records if r["kind"] == "invalid"]


@pytest.mark.parametrize(("spec", "expected"), [
    ("nonsense", "expected 'solution', 'random', 'none', 'llm' or 'module:factory'"),
    ("no_such_module_xyz:factory", "cannot import no_such_module_xyz"),
    ("json:no_such_factory", "module json has no attribute 'no_such_factory'"),
    ("json:decoder", "is a module, not callable"),
    ("json:dumps", "cannot be called as factory(agent_id, role, briefing)"),
])
def test_a_bad_policy_spec_is_a_teaching_error(spec, expected):
    """Each way a spec can be wrong raises PolicyError naming the problem (and the contract where it helps)."""
    loaded = load_scenario("bridge_repair")
    with pytest.raises(PolicyError) as info:
        instantiate(loaded, 0, spec)
    assert expected in str(info.value)


def _write(tmp_path: Path, name: str, code: str) -> None:
    (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")


def test_bad_factories_exit_2_with_one_line_and_no_traceback(tmp_path, monkeypatch, capsys):
    """Wrong signature, a product without decide, a module that raises: `warren run` says so, exit 2."""
    monkeypatch.chdir(tmp_path)  # the current directory is where --policy modules are found
    _write(tmp_path, "twoargs", "def factory(agent_id, role):\n    return None\n")
    _write(tmp_path, "nodecide", "def factory(agent_id, role, briefing):\n    return 42\n")
    _write(tmp_path, "raises", "raise RuntimeError('broken at import')\n")
    cases = {
        "twoargs:factory": "cannot be called as factory(agent_id, role, briefing): too many positional arguments",
        "nodecide:factory": "returned int 42, which has no decide(observation) method",
        "raises:factory": "importing raises raised RuntimeError: broken at import",
    }
    for spec, expected in cases.items():
        assert main(["run", "bridge_repair", "--policy", spec]) == 2, spec
        err = capsys.readouterr().err
        assert err.startswith(f"warren run: policy {spec!r}" if spec == "raises:factory" else "warren run: ")
        assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        if spec != "raises:factory":
            assert CONTRACT in err
    assert main(["eval", "bridge_repair", "--seeds", "0-1", "--policy", "nodecide:factory"]) == 2
    assert "has no decide(observation) method" in capsys.readouterr().err


def test_a_factory_in_the_current_directory_drives_eval(tmp_path, monkeypatch, capsys):
    """A module next to the user is importable by `--policy module:factory` (the cwd is on the import path)."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "sleepy_cwd_policy", "class P:\n    def decide(self, obs):\n        return {'sleep_ms': 60000}\n\n"
                                          "def factory(agent_id, role, briefing):\n    return P()\n")
    assert main(["eval", "bridge_repair", "--seeds", "0-1", "--policy", "sleepy_cwd_policy:factory", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["results"][0]["runs"] == 2 and report["results"][0]["completed"] == 0


@pytest.mark.skipif(importlib.util.find_spec("warren_sim.llm") is not None, reason="warren_sim.llm is installed")
def test_llm_is_a_registered_name_that_asks_for_its_extra(capsys):
    """`--policy llm` without warren_sim.llm's dependencies says which extra to install (exit 2)."""
    assert main(["run", "bridge_repair", "--policy", "llm"]) == 2
    assert "pip install 'warren-sim[llm]'" in capsys.readouterr().err


def test_builtin_specs_resolve_to_factories():
    """solution, random and none are factories of the protocol: factory(agent_id, role, briefing).decide exists."""
    loaded = load_scenario("bridge_repair")
    for spec in ("solution", "random", "none"):
        policy = resolve_policy(spec, loaded, seed=1)("engineer-1", "engineer", {"name": "Sam"})
        assert callable(policy.decide)


class _NoIdea:
    """A policy that never has a usable command, saying so by the convention."""

    def decide(self, obs):
        return {"invalid": "the model's reply had no tool call", "raw": "I think I'll go for a walk"}


def test_invalid_answers_become_noops_with_the_reason_headless():
    """`{"invalid": reason, "raw": ...}` and a malformed command both become noops plus an `invalid` record."""
    loaded = load_scenario("bridge_repair")
    sim, policies = instantiate(loaded, 3, lambda agent_id, role, briefing: _NoIdea())
    run_headless(sim, policies, max_batches=3)
    records = sim.drain_records()
    invalid = [r for r in records if r["kind"] == "invalid"]
    assert invalid and all(r["error"] == "the model's reply had no tool call" for r in invalid)
    assert invalid[0]["command"] == {"invalid": "the model's reply had no tool call",
                                     "raw": "I think I'll go for a walk"}
    noops = [r for r in records if r["kind"] == "command" and r.get("source") == "invalid"]
    assert len(noops) == len(invalid) and all(r["command"] == {"noop": True} for r in noops)

    sim2, _ = instantiate(loaded, 3, "none")
    batch = sim2.advance()
    obs = batch.observations[0]
    command, record = answer_or_noop(sim2, obs.agent_id, obs.observation_id, "walk north")
    assert command == {"noop": True} and "must return a command dict, got str" in record["error"]
    command, record = answer_or_noop(sim2, obs.agent_id, obs.observation_id, {"sleep_ms": 10})
    assert command == {"sleep_ms": 10} and record is None


NO_IDEA_SOLUTION = '''
class NoIdea:
    def decide(self, obs):
        return {"invalid": "no usable command", "raw": obs.observation_id}


def make_policy(agent_id, role, briefing):
    return NoIdea()
'''


async def test_invalid_answers_become_noops_with_the_reason_in_a_served_run(tmp_path, monkeypatch):
    """The server's NPC path applies the same rule: each `invalid` answer is journaled with its reason, run goes on."""
    own = tmp_path / "worlds" / "no_idea"
    own.mkdir(parents=True)
    (own / "scenario.toml").write_text((ROOT / "scenarios" / "bridge_repair" / "scenario.toml").read_text())
    (own / "solution.py").write_text(NO_IDEA_SOLUTION)
    monkeypatch.setenv("WARREN_SCENARIOS", str(own.parent))
    async with served(tmp_path) as api:
        run = await api.create("no_idea", 3, controlled_agents=[])
        with trio.fail_after(30):
            while (await api.run_view(run))["status"] in ("created", "running"):
                await trio.sleep(0.01)
        journal = api.journal(run)
    invalid = [r for r in journal if r["kind"] == "invalid"]
    assert invalid and all(r["error"] == "no usable command" for r in invalid)
    assert all(r["command"] == {"invalid": "no usable command", "raw": r["observation_id"]} for r in invalid)
    noops = [r for r in journal if r["kind"] == "command" and r.get("source") == "invalid"]
    assert len(noops) == len(invalid) and all(r["command"] == {"noop": True} for r in noops)
