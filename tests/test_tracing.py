"""OpenTelemetry traces, recorded by the SDK's in-memory exporter: one decision is one trace, from the agent's span
through the SDK's requests (W3C traceparent) to the server's spans with the verdict, over HTTP against a real
Hypercorn with the LLM policy's GenAI spans (the suite's stand-in model server), and over the WebSocket binding.
Off, nothing of OpenTelemetry is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import trio

pytest.importorskip("opentelemetry.sdk")

from llm_stub import play_solution, scripted_model, solution_table  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402
from sdkhelpers import real_server  # noqa: E402
from test_client_ws import policy_for, ws_client  # noqa: E402

from warren_sim.client import RunEnded  # noqa: E402
from warren_sim.llm import LLMConfig, LLMPolicy  # noqa: E402
from warren_sim.observability.tracing import NO_TRACER, tracer_for  # noqa: E402


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A provider of this test's own (never the global one), exporting to memory as each span ends."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def children(spans: list[Any], parent: Any) -> list[Any]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


async def test_one_decision_is_one_trace_from_the_agent_through_its_model_call_to_the_verdict(tmp_path, traced):
    """The agent wraps each decision in a span; the SDK's poll and submit carry its traceparent, the server's spans
    continue it (run, agent, observation id, verdict), and the LLM policy's model call is a GenAI span in it."""
    provider, exporter = traced
    agent_tracer = provider.get_tracer("my-agent")
    with scripted_model(play_solution(solution_table("bridge_repair", [3]))) as model:
        async with real_server(tmp_path, tracer_provider=provider) as env, env.client() as client:
            run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
            config = LLMConfig(model="scripted", base_url=model.url, api_key="k")
            with trio.fail_after(30):
                async with client.claim(run.run_id, "engineer-1") as agent:
                    briefing = await agent.briefing()
                    policy = LLMPolicy("engineer-1", briefing["role"], briefing, config, tracer_provider=provider)
                    decided: list[str] = []
                    while True:
                        with agent_tracer.start_as_current_span("decide"):
                            try:
                                obs = await agent.next_observation(wait=5)
                            except RunEnded:
                                break
                            command = await trio.to_thread.run_sync(policy.decide, obs)  # the context goes along
                            receipt = await agent.submit(obs, command)
                            assert receipt.status == "accepted"
                            decided.append(obs.observation_id)
    spans = list(exporter.get_finished_spans())
    decisions = [s for s in spans if s.name == "decide"]
    assert len(decided) >= 5 and len(decisions) == len(decided) + 1  # the last one met the run's end
    for span, observation_id in zip(decisions, decided, strict=False):
        trace = [s for s in spans if s.context.trace_id == span.context.trace_id]
        under = children(spans, span)
        assert {s.name for s in under} >= {"warren.poll", "warren.submit", "chat scripted"}, [s.name for s in under]
        assert all(s in trace for s in under)
        submit = next(s for s in under if s.name == "warren.submit")
        assert submit.kind == SpanKind.SERVER
        expected = {"warren.run_id": run.run_id, "warren.agent_id": "engineer-1", "warren.transport": "http",
                    "warren.observation_id": observation_id, "warren.verdict": "accepted",
                    "http.route": "POST /v1/runs/<run_id>/agents/<agent_id>/commands"}
        assert {k: submit.attributes.get(k) for k in expected} == expected
        poll = next(s for s in under if s.name == "warren.poll")
        assert poll.attributes["warren.observation_id"] == observation_id
        chat = next(s for s in under if s.name == "chat scripted")
        assert chat.kind == SpanKind.CLIENT
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert len({s.context.trace_id for s in decisions}) == len(decisions)  # one trace per decision


async def test_websocket_methods_continue_the_agents_trace(tmp_path, traced):
    """Over WS /v1/agent, the SDK carries traceparent in each request's params: every agent.submit span is the
    child of the agent's decision span, with the verdict; agent.claim gets a span of its own."""
    provider, exporter = traced
    agent_tracer = provider.get_tracer("my-agent")
    async with real_server(tmp_path, tracer_provider=provider) as env, ws_client(env) as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        with trio.fail_after(20):
            async with client.claim(run.run_id, "engineer-1") as agent:
                policy = policy_for(await agent.briefing())
                decided = 0
                async for obs in agent.observations(wait=5):
                    with agent_tracer.start_as_current_span("decide"):
                        receipt = await agent.submit(obs, policy.decide(obs))
                        assert receipt.status == "accepted"
                        decided += 1
    spans = list(exporter.get_finished_spans())
    decisions = [s for s in spans if s.name == "decide"]
    assert decided >= 5 and len(decisions) == decided
    for span in decisions:
        [submit] = [s for s in children(spans, span) if s.name == "warren.submit"]
        assert submit.attributes["rpc.method"] == "agent.submit" and submit.attributes["warren.transport"] == "ws"
        assert submit.attributes["warren.verdict"] == "accepted"
        assert submit.attributes["warren.observation_id"].startswith("engineer-1#")
    assert any(s.name == "warren.claim" and s.attributes["warren.transport"] == "ws" for s in spans)


async def test_refusals_are_recorded_without_marking_the_span_an_error(tmp_path, traced):
    """A claim refused with a 4xx (an agent the run does not control: 409) is a span with error.type = the status,
    its status unset: a refusal is the protocol working, not the server failing."""
    provider, exporter = traced
    async with real_server(tmp_path, tracer_provider=provider) as env, env.http() as http:
        run = (await http.post("/v1/runs", params={"scenario": "bridge_repair"},
                               json={"controlled_agents": ["engineer-1"]})).json()["run_id"]
        r = await http.post(f"/v1/runs/{run}/agents/courier-1/claim")
        assert r.status_code == 409
    [span] = [s for s in exporter.get_finished_spans() if s.name == "warren.claim"]
    assert span.attributes["error.type"] == "409" and span.status.status_code == StatusCode.UNSET
    assert span.attributes["warren.agent_id"] == "courier-1"


def test_tracing_off_imports_nothing_and_costs_a_shared_no_op():
    """Without a configured provider the app's tracer is NO_TRACER; a process that makes an app, an SDK client and
    sends a request never imports opentelemetry, and configure_from_env does nothing without OTEL_* variables."""
    assert tracer_for(None) is NO_TRACER or "opentelemetry.trace" in sys.modules
    code = ("import sys\n"
            "from warren_sim.http.app import create_app\n"
            "from warren_sim.client import AgentClient\n"
            "from warren_sim.client._core import headers\n"
            "from warren_sim.observability.tracing import configure_from_env\n"
            "assert configure_from_env() is None\n"
            "app = create_app(); headers()\n"
            "assert app.warren.tracer.enabled is False\n"
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_otel_variables_configure_an_otlp_exporter_the_standard_way():
    """OTEL_EXPORTER_OTLP_ENDPOINT (and OTEL_SERVICE_NAME) are all it takes: configure_from_env installs an SDK
    provider exporting OTLP/HTTP, named as the variables say; OTEL_SDK_DISABLED=true leaves tracing off."""
    code = ("from opentelemetry import trace\n"
            "from warren_sim.observability.tracing import configure_from_env, tracer_for\n"
            "p = configure_from_env()\n"
            "assert trace.get_tracer_provider() is p\n"
            "exporters = [type(s.span_exporter).__name__ for s in p._active_span_processor._span_processors]\n"
            "print(p.resource.attributes['service.name'], exporters, tracer_for(None).enabled)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318", OTEL_SERVICE_NAME="my-warren")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "my-warren ['OTLPSpanExporter'] True"
    env["OTEL_SDK_DISABLED"] = "true"
    off = subprocess.run([sys.executable, "-c", "from warren_sim.observability.tracing import configure_from_env\n"
                          "assert configure_from_env() is None"], capture_output=True, text=True, env=env, timeout=60)
    assert off.returncode == 0, off.stderr
