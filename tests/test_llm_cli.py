"""``--policy llm`` on the command line: ``warren run``, ``warren eval`` and ``warren agent`` (HTTP and WS), each
a real subprocess talking to a real local HTTP server that plays a scripted model (tests/llm_stub.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("openai")

from llm_stub import play_solution, scripted_model, solution_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WARREN = [sys.executable, "-m", "warren_sim.cli"]


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, Any]]:
    return solution_table("bridge_repair", range(5))


def warren(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WARREN_LLM_"))}
    full.update(env)
    return subprocess.run([*WARREN, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full,
                          stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_warren_run_with_policy_llm_completes_and_reports_tokens(table: dict[str, dict[str, Any]],
                                                                   tmp_path: Path) -> None:
    with scripted_model(play_solution(table)) as model:
        env = model.env()
        del env["WARREN_LLM_MODEL"]  # given as --model instead
        proc = warren(env, "run", "bridge_repair", "--seed", "3", "--policy", "llm", "--model", "scripted",
                      "--max-history", "4", "--temperature", "0.3", "--trace", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert "bridge_repair seed 3: completed" in proc.stdout
    prompt = sum(len(json.dumps(r["messages"])) // 4 for r in model.requests)
    assert f"tokens: {prompt:,} prompt" in proc.stdout, proc.stdout
    assert all(r["temperature"] == 0.3 for r in model.requests)
    assert max(sum(1 for m in r["messages"] if m["role"] == "assistant") for r in model.requests) == 4


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str],
          *args: str) -> tuple[int, str, str]:
    """``warren ARGS`` in this process (the error paths: no subprocess start-up to pay for)."""
    from warren_sim.cli import main

    for key in [k for k in os.environ if k.startswith(("OPENAI_", "WARREN_LLM_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_unreachable_endpoint_is_one_clear_error_before_the_run(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1", "OPENAI_API_KEY": "k"}
    code, out, err = _main(monkeypatch, capsys, env, "run", "bridge_repair", "--policy", "llm", "--model", "m")
    assert code == 2
    assert err.startswith("warren run: --policy llm: cannot reach the model endpoint http://127.0.0.1:")
    assert "OPENAI_BASE_URL" in err and out == ""  # nothing ran
    code, _, err = _main(monkeypatch, capsys, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "eval", "bridge_repair",
                         "--seeds", "0", "--policy", "llm")
    assert code == 2 and "no model: pass --model NAME or set WARREN_LLM_MODEL" in err


def test_a_refused_key_is_one_clear_error_before_the_run(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with scripted_model(lambda r: {"tool": "noop"}, key="sk-right") as model:
        code, out, err = _main(monkeypatch, capsys, model.env(OPENAI_API_KEY="sk-wrong"), "eval", "bridge_repair",
                               "--seeds", "0-1", "--policy", "llm")
    assert code == 2 and out == ""
    assert "refused the API key (401: Incorrect API key provided)" in err and not model.requests


@pytest.mark.slow
def test_warren_eval_over_five_seeds_reports_completion_and_tokens(table: dict[str, dict[str, Any]]) -> None:
    """``warren eval bridge_repair --seeds 0-4 --policy llm`` against the scripted model."""
    with scripted_model(play_solution(table)) as model:
        proc = warren(model.env(), "eval", "bridge_repair", "--seeds", "0-4", "--policy", "llm", "--json")
        before = len(model.requests)
        table_proc = warren(model.env(), "eval", "bridge_repair", "--seeds", "0-1", "--policy", "llm")
        table_requests = model.requests[before:]
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["results"][0]
    assert report["runs"] == 5 and report["completion_rate"] == 1.0
    tokens = report["tokens"]
    assert tokens["prompt"] == sum(len(json.dumps(r["messages"])) // 4 for r in model.requests[:-len(table_requests)])
    assert tokens["completion"] > 0
    assert sum(s["tokens"]["prompt"] for s in report["per_seed"]) == tokens["prompt"]
    assert table_proc.returncode == 0, table_proc.stderr
    assert "tokens: " in table_proc.stdout and " prompt + " in table_proc.stdout


def _create(url: str, **body: Any) -> str:
    response = httpx.post(f"{url}/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                          json={"controlled_agents": ["engineer-1"], "npc_policy": "solution", **body})
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "ws"])
def test_warren_agent_with_policy_llm_plays_a_served_run_and_learns_verdicts(
        served: str, transport: str, table: dict[str, dict[str, Any]]) -> None:
    """Remote: the same policy through the SDK; receipts reach the model's history through ``on_receipt``."""
    run = _create(served)
    with scripted_model(play_solution(table)) as model:
        proc = warren(model.env(), "agent", served, "--run", run, "--agent", "engineer-1", "--policy", "llm",
                      "--transport", transport)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert f"{run} ended: completed" in proc.stdout
    tool_messages = [m["content"] for r in model.requests for m in r["messages"] if m["role"] == "tool"]
    assert any("verdict accepted" in c for c in tool_messages)
    assert all(r["messages"][0]["content"].startswith("You are Sam the engineer (engineer-1") for r in model.requests)


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "ws"])
def test_warren_agent_with_policy_llm_rides_out_network_faults_asking_the_model_once_an_observation(
        served: str, transport: str, table: dict[str, dict[str, Any]]) -> None:
    """docs/faults.md: the LLM policy rides out every network kind. A lost reply is retried with the same
    command (not decided again), a redelivered or pushed-again envelope is dropped, a closed connection is
    reconnected: the model is asked once per observation the agent answered, and none is accepted twice."""
    spec = "reset=0.15,lost_reply=0.15,unavailable=0.15,redeliver=0.15,disconnect=0.15,delay=0.15:50ms"
    run = _create(served, faults={"spec": spec, "seed": 2})
    with scripted_model(play_solution(table)) as model:
        proc = warren(model.env(), "agent", served, "--run", run, "--agent", "engineer-1", "--policy", "llm",
                      "--transport", transport, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert f"{run} ended: completed" in proc.stdout and "faults met: " in proc.stdout, proc.stdout[-2000:]
    journal = [json.loads(line) for line in httpx.get(f"{served}/v1/runs/{run}/journal").text.splitlines()]
    met = {r["fault"] for r in journal if r["kind"] == "fault"}
    assert met & {"reset", "lost_reply"}, met
    accepted = [r["observation_id"] for r in journal
                if r["kind"] == "verdict" and r["agent"] == "engineer-1" and r["status"] == "accepted"]
    assert len(set(accepted)) == len(accepted), accepted
    assert len(model.requests) == len(accepted), (len(model.requests), len(accepted))


@pytest.mark.slow
def test_after_a_rejected_verdict_warren_agent_asks_the_model_again_with_the_reason(
        served: str, table: dict[str, dict[str, Any]]) -> None:
    """The server refuses a move to a cell that does not exist; the observation is still outstanding, so
    ``warren agent`` asks the model again, whose prompt now carries the verdict; the run still completes."""
    run = _create(served)
    solution = play_solution(table)
    first = {"done": False}

    def script(request: dict[str, Any]) -> dict[str, Any]:
        if not first["done"]:
            first["done"] = True
            return {"tool": "move_to", "args": {"dest": "nowhere:99,99"}}
        return solution(request)

    with scripted_model(script) as model:
        proc = warren(model.env(), "agent", served, "--run", run, "--agent", "engineer-1", "--policy", "llm")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert ">>> move_to {\"dest\": \"nowhere:99,99\"}  [rejected: " in proc.stdout
    retry = model.requests[1]
    assert retry["messages"][-1]["content"] == model.requests[0]["messages"][-1]["content"]  # the same observation
    verdict = retry["messages"][3]
    assert verdict["role"] == "tool" and "verdict rejected: " in verdict["content"] and "nowhere:99,99" in verdict["content"]
    assert f"{run} ended: completed" in proc.stdout


# -- the start-up probe and the model's own name (issue: README's `--model llama3.1` against Ollama) -----------
@pytest.fixture(scope="module")
def seed3() -> dict[str, dict[str, Any]]:
    return solution_table("bridge_repair", [3])


def test_ollama_lists_name_latest_and_warren_run_model_name_plays(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  seed3: dict[str, dict[str, Any]]) -> None:
    """`warren run bridge_repair --seed 3 --policy llm --model llama3.1` against an endpoint that lists
    `llama3.1:latest` (as Ollama does) and serves the name: no warning, the run completes."""
    with scripted_model(play_solution(seed3), models=["llama3.1:latest", "qwen2.5:7b"],
                        serves=["llama3.1", "llama3.1:latest"]) as model:
        env = {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "k"}
        code, out, err = _main(monkeypatch, capsys, env, "run", "bridge_repair", "--seed", "3", "--policy", "llm",
                               "--model", "llama3.1")
    assert code == 0, err
    assert "bridge_repair seed 3: completed" in out and "warning" not in err
    assert {r["model"] for r in model.requests} == {"llama3.1"}


def test_a_gateway_alias_missing_from_the_list_is_a_warning_and_the_run_plays(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], seed3: dict[str, dict[str, Any]]) -> None:
    """`warren run bridge_repair --seed 3 --policy llm --model team-default` against a gateway whose list does not
    name the alias it routes: one warning, then the requests decide, and they are served."""
    with scripted_model(play_solution(seed3), models=["gpt-4o-mini"], serves=["team-default"]) as model:
        env = {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "k"}
        code, out, err = _main(monkeypatch, capsys, env, "run", "bridge_repair", "--seed", "3", "--policy", "llm",
                               "--model", "team-default")
    assert code == 0, err
    assert "does not list model 'team-default' (it lists: gpt-4o-mini); trying it anyway" in err
    assert "bridge_repair seed 3: completed" in out


def test_a_model_nobody_serves_stops_at_its_first_request_with_the_404(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`warren run bridge_repair --policy llm --model gpt-9` against an endpoint that neither lists nor serves it:
    the probe warns, the first request's 404 is the error (exit 2, one line saying what to do), one request sent."""
    with scripted_model(lambda r: {"tool": "noop"}, models=["llama3.1:latest"], serves=["llama3.1:latest"]) as model:
        env = {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "k"}
        code, out, err = _main(monkeypatch, capsys, env, "run", "bridge_repair", "--policy", "llm", "--model",
                               "gpt-9")
    assert code == 2, (out, err)
    assert "warning: the model endpoint" in err and "does not list model 'gpt-9'" in err
    assert "warren run: --policy llm: the model endpoint" in err
    assert "answered 404 to a request for model 'gpt-9' (model 'gpt-9' not found, try pulling it first)" in err
    assert "pass a model it serves with --model" in err
