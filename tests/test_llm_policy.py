"""``warren_sim.llm``: the tool-calling policy against a real local HTTP server playing a scripted model.

The server (tests/llm_stub.py) speaks the OpenAI chat-completions wire format over loopback and stands in
for the external service; the policy talks to it with the official ``openai`` client. The world is the
real engine, driven by the same headless loop ``warren run`` uses.
"""

from __future__ import annotations

import json
import re
import socket
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("openai")

from llm_stub import play_solution, scripted_model, solution_table  # noqa: E402

from warren_sim.engine import Simulation, briefing, run_headless  # noqa: E402
from warren_sim.llm import LLMConfig, LLMConfigError, LLMPolicy, factory, probe  # noqa: E402
from warren_sim.runtime.clock import unix_now, wall_seconds  # noqa: E402
from warren_sim.scenarios import load_scenario  # noqa: E402


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, Any]]:
    return solution_table("bridge_repair", [3])


def run_llm(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], seed: int = 3, record: bool = True
            ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """bridge_repair headless with every agent on ``--policy llm``: (summary, journal records, policies)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    sc = load_scenario("bridge_repair")
    sim = Simulation(sc.spec, seed, run_id="llm", params=sc.params, record=record)
    policies = {a.id: factory(a.id, a.role, briefing(sim, a.id)) for a in sc.spec.agents}
    records: list[dict[str, Any]] = []
    summary = run_headless(sim, policies, on_batch=lambda s: records.extend(s.drain_records()))
    records.extend(sim.drain_records())
    return summary, records, policies


def first_obs(seed: int = 3, agent: str = "engineer-1") -> tuple[Any, dict[str, Any]]:
    sc = load_scenario("bridge_repair")
    sim = Simulation(sc.spec, seed, run_id="one", params=sc.params)
    batch = sim.advance()
    assert batch is not None
    obs = next(o for o in batch.observations if o.agent_id == agent)
    return obs, briefing(sim, agent)


def tools_of(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request["tools"]}


def test_requests_carry_narrowed_tools_the_text_and_the_history_and_the_model_completes_the_run(
        monkeypatch: pytest.MonkeyPatch, table: dict[str, dict[str, Any]]) -> None:
    """A scripted model playing the solution's moves completes bridge_repair; its requests carry the catalog's
    tools narrowed with the affordances' enums (plus sleep and noop), the observation text as the user
    message, and the history with the outcomes of earlier commands; tokens are counted."""
    with scripted_model(play_solution(table)) as model:
        summary, records, policies = run_llm(monkeypatch, model.env())
    assert summary["status"] == "completed", summary
    assert not [r for r in records if r["kind"] == "invalid"]
    engineer = [r for r in model.requests if "(engineer-1, role engineer)" in r["messages"][0]["content"]]
    first = engineer[0]
    tools = tools_of(first)
    assert list(tools) == ["move_to", "take", "say", "tell", "inspect", "sleep", "noop"]  # available ones only
    assert tools["take"]["parameters"]["properties"]["item"]["enum"] == ["toolbox-1"]
    assert tools["tell"]["parameters"]["properties"]["to"]["enum"] == ["courier-1", "medic-1"]
    assert "enum" not in tools["move_to"]["parameters"]["properties"]["dest"]  # "or any cell": described
    assert "bridge|clinic|depot|sawmill|square" in tools["move_to"]["parameters"]["properties"]["dest"]["description"]
    assert tools["sleep"]["parameters"]["required"] == ["sleep_ms"]
    assert first["tool_choice"] == "required" and first["model"] == "scripted"
    system, user = first["messages"][0]["content"], first["messages"][-1]["content"]
    assert "Premise: Repair the storm-damaged bridge" in system and "- repair: Restore" in system
    assert user.startswith("[t=0s] You are Sam the engineer (engineer-1, role engineer) at workshop")
    # the repair decision: one enum per parameter (the catalog shares one schema object between them)
    repair = next(r for r in engineer if "repair" in tools_of(r))
    props = tools_of(repair)["repair"]["parameters"]["properties"]
    assert props["structure"]["enum"] == ["bridge"] and set(props["item"]["enum"]) == {"plank-1", "plank-2"}
    # history: the previous exchange, with what became of it
    second = engineer[1]
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert second["messages"][2]["tool_calls"][0]["function"] == {"name": "take", "arguments": '{"item": "toolbox-1"}'}
    assert second["messages"][3]["content"] == 'command take {"item": "toolbox-1"}; outcome accepted'
    later = [m["content"] for r in engineer for m in r["messages"] if m["role"] == "tool"]
    assert any("outcome accepted, then completed" in c for c in later)  # a move_to that finished later
    usage = policies["engineer-1"].usage
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert sum(p.usage["prompt_tokens"] for p in policies.values()) == sum(
        len(json.dumps(r["messages"])) // 4 for r in model.requests)


def test_history_is_bounded_by_max_history(monkeypatch: pytest.MonkeyPatch,
                                           table: dict[str, dict[str, Any]]) -> None:
    """WARREN_LLM_MAX_HISTORY=2: never more than two past exchanges in a request."""
    with scripted_model(play_solution(table)) as model:
        summary, _, _ = run_llm(monkeypatch, model.env(WARREN_LLM_MAX_HISTORY="2"))
    assert summary["status"] == "completed"
    assert max(sum(1 for m in r["messages"] if m["role"] == "assistant") for r in model.requests) == 2


def test_garbage_replies_become_journaled_noops_with_the_reason_in_the_next_prompt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No call, a tool that was not offered, arguments outside the enums, arguments that are not JSON: each is
    a noop with an ``invalid`` journal record naming the reason, the reason heads the next prompt, and the
    run goes on to its end (here the time limit: nobody works) without a crash."""
    garbage = [{"content": "I think I will take the toolbox."},
               {"tool": "fly", "args": {"to": "moon"}},
               {"tool": "take", "args": {"item": "hammer-9"}},
               {"tool": "take", "arguments": "{item: toolbox-1"}]
    seen = {"engineer": 0}

    def script(request: dict[str, Any]) -> dict[str, Any]:
        if "(engineer-1, role engineer)" in request["messages"][0]["content"] and seen["engineer"] < len(garbage):
            seen["engineer"] += 1
            return garbage[seen["engineer"] - 1]
        return {"tool": "sleep", "args": {"sleep_ms": 120_000}}

    with scripted_model(script) as model:
        summary, records, _ = run_llm(monkeypatch, model.env())
    assert summary["status"] == "failed" and "time limit" in summary["reason"], summary
    invalid = [r for r in records if r["kind"] == "invalid"]
    assert [r["agent"] for r in invalid] == ["engineer-1"] * 4
    reasons = [r["error"] for r in invalid]
    assert "the reply had no tool call" in reasons[0] and "I think I will take" in reasons[0]
    assert "tool 'fly' was not offered for this decision; call one of: move_to, take" in reasons[1]
    assert "'hammer-9' is not one of ['toolbox-1']" in reasons[2]
    assert "are not JSON" in reasons[3]
    noops = [r for r in records if r["kind"] == "command" and r["agent"] == "engineer-1" and r.get("source") == "invalid"]
    assert len(noops) == 4 and all(r["command"] == {"noop": True} for r in noops)
    engineer = [r for r in model.requests if "(engineer-1, role engineer)" in r["messages"][0]["content"]]
    for before, after in zip(reasons, engineer[1:5], strict=True):
        assert after["messages"][-1]["content"].startswith("(Your reply to engineer-1#")
        assert before in after["messages"][-1]["content"]
    # the tool-call cases also answer the call itself, so the conversation stays well-formed
    tool_notes = [m["content"] for m in engineer[4]["messages"] if m["role"] == "tool"]
    assert any(c.startswith("not used: tool 'fly' was not offered") for c in tool_notes)


def test_429_and_5xx_are_retried_with_backoff_inside_the_budget() -> None:
    """A 429 (with Retry-After) and a 503 are retried; the third answer is used; usage counts only answers."""
    replies = iter([{"status": 429, "headers": {"Retry-After": "0"}}, {"status": 503}, {"tool": "noop", "args": {}}])
    obs, brief = first_obs()
    with scripted_model(lambda r: next(replies)) as model:
        config = LLMConfig(model="scripted", base_url=model.url, api_key="k", backoff_s=0.01)
        policy = LLMPolicy("engineer-1", "engineer", brief, config)
        assert policy.decide(obs) == {"noop": True}
    assert len(model.requests) == 3 and policy.requests == 3
    assert policy.usage["completion_tokens"] == policy.last_usage["completion_tokens"] > 0


def test_an_endpoint_that_keeps_failing_gives_an_invalid_noop_within_the_budget() -> None:
    obs, brief = first_obs()
    with scripted_model(lambda r: {"status": 500, "message": "overloaded"}) as model:
        config = LLMConfig(model="scripted", base_url=model.url, api_key="k", timeout_s=0.5, backoff_s=0.05)
        policy = LLMPolicy("engineer-1", "engineer", brief, config)
        started = wall_seconds()
        command = policy.decide(obs)
        took = wall_seconds() - started
    assert "kept failing (500: overloaded)" in command["invalid"] and "time budget ran out" in command["invalid"]
    assert took < 1.5 and len(model.requests) >= 2


def test_a_slow_model_is_cut_at_the_observations_deadline() -> None:
    """A remote observation's ``deadline_unix`` bounds the request (minus a margin), below the timeout."""
    obs, brief = first_obs()
    remote = SimpleNamespace(**{k: getattr(obs, k) for k in ("agent_id", "observation_id", "seq", "time", "reason",
                                                              "observation", "affordances", "text")},
                             deadline_unix=unix_now() + 1.0)
    with scripted_model(lambda r: {"tool": "noop", "args": {}, "delay": 3.0}) as model:
        config = LLMConfig(model="scripted", base_url=model.url, api_key="k", timeout_s=30.0)
        policy = LLMPolicy("engineer-1", "engineer", brief, config)
        # the deadline is set right before the decision: on a loaded machine, starting the scripted model
        # alone took 0.3 s of the second, and the budget read 0.2 s
        remote.deadline_unix = unix_now() + 1.0
        started = wall_seconds()
        command = policy.decide(remote)
        took = wall_seconds() - started
    assert re.search(r"did not answer within the decision's time budget \(0\.[345]s\)", command["invalid"])
    assert 0.3 < took < 1.2


def test_receipts_put_verdicts_in_the_next_prompt() -> None:
    """``on_receipt`` (what remote clients call after each submit) puts the verdict in the history."""
    obs, brief = first_obs()
    with scripted_model(lambda r: {"tool": "take", "args": {"item": "toolbox-1"}}) as model:
        config = LLMConfig(model="scripted", base_url=model.url, api_key="k")
        policy = LLMPolicy("engineer-1", "engineer", brief, config)
        assert policy.decide(obs) == {"action": "take", "args": {"item": "toolbox-1"}}
        policy.on_receipt({"command_id": "c-1", "observation_id": obs.observation_id, "status": "rejected",
                           "detail": "toolbox-1 was taken by courier-1 earlier in this batch", "outcome": None})
        policy.decide(obs)
    tool_message = model.requests[1]["messages"][3]
    assert tool_message["role"] == "tool"
    assert "verdict rejected: toolbox-1 was taken by courier-1 earlier in this batch" in tool_message["content"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_probe_tells_a_dead_endpoint_a_refused_key_and_an_unlisted_model_apart(
        capsys: pytest.CaptureFixture[str]) -> None:
    dead = LLMConfig(model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", api_key="k")
    with pytest.raises(LLMConfigError, match="cannot reach the model endpoint http://127.0.0.1:.*set OPENAI_BASE_URL"):
        probe(dead)
    with scripted_model(lambda r: {"tool": "noop"}, key="sk-right", models=["llama3.1", "qwen2.5"]) as model:
        with pytest.raises(LLMConfigError, match="refused the API key \\(401: Incorrect API key provided\\)"):
            probe(LLMConfig(model="llama3.1", base_url=model.url, api_key="sk-wrong"))
        capsys.readouterr()
        probe(LLMConfig(model="gpt-9", base_url=model.url, api_key="sk-right"))  # only a warning: requests decide
        assert "does not list model 'gpt-9' (it lists: llama3.1, qwen2.5); trying it anyway" in capsys.readouterr().err
        probe(LLMConfig(model="qwen2.5", base_url=model.url, api_key="sk-right"))  # passes
        assert capsys.readouterr().err == ""
    with scripted_model(lambda r: {"tool": "noop"}, list_status=404) as model:
        probe(LLMConfig(model="anything", base_url=model.url, api_key="k"))  # no model list: nothing to check


def test_configuration_errors_teach() -> None:
    with pytest.raises(LLMConfigError, match="no model: pass --model NAME or set WARREN_LLM_MODEL"):
        LLMConfig.from_env({})
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY is not set"):
        LLMConfig.from_env({"WARREN_LLM_MODEL": "gpt-4o-mini"})
    with pytest.raises(LLMConfigError, match="WARREN_LLM_TEMPERATURE must be between 0 and 2"):
        LLMConfig.from_env({"WARREN_LLM_MODEL": "m", "OPENAI_BASE_URL": "http://x/v1", "WARREN_LLM_TEMPERATURE": "9"})
    local = LLMConfig.from_env({"WARREN_LLM_MODEL": "m", "OPENAI_BASE_URL": "http://localhost:11434/v1/",
                                "WARREN_LLM_MAX_HISTORY": "3", "WARREN_LLM_TEMPERATURE": "0.2"})
    assert (local.base_url, local.max_history, local.temperature) == ("http://localhost:11434/v1", 3, 0.2)


def test_a_command_the_rules_refuse_in_process_reaches_the_next_prompt_as_a_rejected_verdict(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``move_to``'s ``dest`` is free (any cell), so the schema passes ``nowhere:99,99``; the engine refuses it
    (noop + ``invalid`` record) and the headless loop tells the policy through ``on_receipt``."""
    replies = iter([{"tool": "move_to", "args": {"dest": "nowhere:99,99"}}])

    def script(request: dict[str, Any]) -> dict[str, Any]:
        if "(engineer-1, role engineer)" in request["messages"][0]["content"]:
            return next(replies, {"tool": "sleep", "args": {"sleep_ms": 600_000}})
        return {"tool": "sleep", "args": {"sleep_ms": 600_000}}

    with scripted_model(script) as model:
        _, records, _ = run_llm(monkeypatch, model.env())
    refused = [r for r in records if r["kind"] == "invalid"]
    assert len(refused) == 1 and refused[0]["command"] == {"action": "move_to", "args": {"dest": "nowhere:99,99"}}
    engineer = [r for r in model.requests if "(engineer-1, role engineer)" in r["messages"][0]["content"]]
    note = engineer[1]["messages"][3]
    assert note["role"] == "tool" and note["content"].startswith('command move_to {"dest": "nowhere:99,99"}; verdict rejected: ')
    assert refused[0]["error"] in note["content"]
