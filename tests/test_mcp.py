"""``warren mcp``: one remote agent as an MCP server, driven by the official ``mcp`` SDK's own client.

The fast test connects the SDK's client to the server object in-process, against a real WARREN server on
loopback; the slow ones launch ``warren mcp`` over stdio, as an MCP host does, against a real ``warren serve``
subprocess, and play a run to its end.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import trio

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from warren_sim.http.server import start_server  # noqa: E402
from warren_sim.mcp.server import build_server, open_session  # noqa: E402
from warren_sim.runtime.manager import ServerConfig  # noqa: E402
from warren_sim.scenarios import load_scenario, make_policy  # noqa: E402

WARREN = [sys.executable, "-m", "warren_sim.cli"]
CATALOG = ["move_to", "take", "drop", "give", "say", "tell", "inspect", "repair"]


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


def create_run(url: str, agent: str = "engineer-1", seed: int = 3, pace: float | None = None) -> str:
    response = httpx.post(f"{url}/v1/runs", params={"scenario": "bridge_repair", "seed": seed},
                          json={"controlled_agents": [agent], "npc_policy": "solution", "pace": pace})
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])


async def play_to_the_end(client: Any, agent: str = "engineer-1", max_steps: int = 200,
                          verdicts: tuple[str, ...] = ("accepted",)) -> str:
    """Observe, decide with the scenario's solution policy on the structured parts, call the command's tool;
    until observe says the run ended. Returns that message. ``verdicts``: those a command may get (under
    faults a retried submit is also ``duplicate``, docs/faults.md)."""
    policy = make_policy(load_scenario("bridge_repair"), "solution", agent, "engineer", {}, 3)
    for _ in range(max_steps):
        result = await client.call_tool("observe", {"wait": 10})
        if result.is_error:
            return text_of(result)
        if result.structured_content is None:
            continue
        obs = SimpleNamespace(agent_id=agent, text=text_of(result), time=result.structured_content["sim_time_ms"],
                              **result.structured_content)
        command = policy.decide(obs)
        if "action" in command:
            verdict = await client.call_tool(command["action"], command["args"])
        elif "sleep_ms" in command:
            verdict = await client.call_tool("sleep", {"sleep_ms": command["sleep_ms"]})
        else:
            verdict = await client.call_tool("noop", {})
        assert not verdict.is_error, text_of(verdict)
        assert verdict.structured_content["status"] in verdicts, text_of(verdict)
    raise AssertionError("the run did not end")


async def test_tools_observe_act_and_receipts_in_process() -> None:
    """The SDK's client against the server object (in-process) over a real WARREN server on loopback: the
    tools are observe + the catalog (schemas from the briefing) + sleep, noop, receipt; the briefing is a
    resource; a take is accepted, a bad take is a rejected verdict (a result, not an error), the receipt tool
    shows the outcome; the run plays to its end and then observe is a tool error saying so."""
    with tempfile.TemporaryDirectory() as data:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(start_server, ServerConfig(data_dir=Path(data)), "127.0.0.1", 0)
            try:
                session = await open_session(server.url, None, "engineer-1", create="bridge_repair", seed=3)
                async with session_closed(session), Client(build_server(session)) as client:
                    tools = {t.name: t for t in (await client.list_tools()).tools}
                    assert list(tools) == ["observe", *CATALOG, "sleep", "noop", "receipt"]
                    assert tools["take"].input_schema == session.briefing["tool_catalog"][1]["input_schema"]
                    resources = (await client.list_resources()).resources
                    assert [str(r.uri) for r in resources] == [session.uri]
                    brief = await client.read_resource(session.uri)
                    assert '"premise": "Repair the storm-damaged bridge' in brief.contents[0].text

                    bad_wait = await client.call_tool("observe", {"wait": "soon"})
                    assert bad_wait.is_error and "wait must be a number of seconds" in text_of(bad_wait)
                    unknown = await client.call_tool("fly", {})
                    assert unknown.is_error and "unknown tool 'fly'; the tools are: observe, move_to" in text_of(unknown)
                    first = await client.call_tool("observe", {"wait": 5})
                    assert not first.is_error
                    assert text_of(first).startswith("[t=0s] You are Sam the engineer")
                    assert first.structured_content["observation_id"] == "engineer-1#0"
                    assert first.structured_content["affordances"][1]["action"] == "take"
                    took = await client.call_tool("take", {"item": "toolbox-1"})
                    assert (took.is_error, took.structured_content["status"]) == (False, "accepted")
                    # the next command observes first (the last one was answered), then is judged
                    bad = await client.call_tool("take", {"item": "toolbox-1"})
                    assert not bad.is_error and bad.structured_content["status"] == "rejected"
                    assert "still yours to answer" in text_of(bad)
                    receipt = await client.call_tool("receipt", {"command_id": took.structured_content["command_id"]})
                    assert receipt.structured_content["outcome"] == "accepted"
                    ended = await play_to_the_end(client)
                    assert "has ended (completed)" in ended, ended
            finally:
                server.shutdown()


@asynccontextmanager
async def session_closed(session: Any) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await session.aclose()


def mcp_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=WARREN[0], args=[*WARREN[1:], "mcp", *args])


@pytest.mark.slow
async def test_warren_mcp_over_stdio_plays_a_served_run_to_its_end(served: str, tmp_path: Path) -> None:
    """``warren mcp URL --run R --agent engineer-1`` launched by the SDK's stdio client, as a host does."""
    run = create_run(served)
    with open(tmp_path / "mcp.log", "w") as log:
        async with Client(stdio_client(mcp_params(served, "--run", run, "--agent", "engineer-1"), errlog=log)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["observe", *CATALOG, "sleep", "noop", "receipt"]
            # a command tool with no observation yet observes first, then submits
            took = await client.call_tool("take", {"item": "toolbox-1"})
            assert took.structured_content["status"] == "accepted", text_of(took)
            ended = await play_to_the_end(client)
    assert "has ended (completed)" in ended
    assert f"claimed engineer-1 of {run}" in (tmp_path / "mcp.log").read_text()
    view = httpx.get(f"{served}/v1/runs/{run}").json()
    assert view["status"] == "completed"


@pytest.mark.slow
async def test_a_lost_lease_and_an_ended_run_are_tool_errors_that_say_what_to_do(served: str, tmp_path: Path) -> None:
    # paced: once engineer-1 is released it no longer blocks the run (DESIGN 3), and unpaced the run could reach
    # its end before the test claims the agent again (it did, once, on a loaded CI machine: 410)
    run = create_run(served, pace=1.0)
    log_path = tmp_path / "mcp.log"
    with open(log_path, "w") as log:
        async with Client(stdio_client(mcp_params(served, "--run", run, "--agent", "engineer-1"), errlog=log)) as client:
            assert not (await client.call_tool("observe", {"wait": 5})).is_error
            lease = log_path.read_text().split("lease ")[1].split()[0]
            base = f"{served}/v1/runs/{run}/agents/engineer-1"
            assert httpx.post(f"{base}/release", params={"lease": lease}).status_code == 200
            assert httpx.post(f"{base}/claim").status_code == 200  # someone else holds it now
            lost = await client.call_tool("take", {"item": "toolbox-1"})
            assert lost.is_error
            # the SDK claims again after the 403 (docs/faults.md) and that claim meets the other holder's lease
            assert "lease for engineer-1 is no longer valid and claiming it again was refused (409)" in text_of(lost)
            assert "held by another lease" in text_of(lost)
            assert "Restart warren mcp" in text_of(lost)
    run2 = create_run(served)
    with open(tmp_path / "mcp2.log", "w") as log:
        async with Client(stdio_client(mcp_params(served, "--run", run2, "--agent", "engineer-1"), errlog=log)) as client:
            assert httpx.delete(f"{served}/v1/runs/{run2}").status_code == 200
            ended = await client.call_tool("observe", {"wait": 5})
            assert ended.is_error
            assert f"run {run2} has ended (cancelled)" in text_of(ended)
            assert "start warren mcp on a new run" in text_of(ended)


@pytest.mark.slow
def test_warren_mcp_that_cannot_start_exits_2_with_the_servers_reason(served: str) -> None:
    proc = subprocess.run([*WARREN, "mcp", served, "--run", "run-404", "--agent", "engineer-1"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "warren mcp: cannot start on" in proc.stderr and "404" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_warren_mcp_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from warren_sim.cli import main

    assert main(["mcp", "http://127.0.0.1:9", "--agent", "engineer-1"]) == 2
    assert "name the run with --run RUN or --create SCENARIO" in capsys.readouterr().err
    assert main(["mcp", "http://127.0.0.1:9", "--agent", "engineer-1", "--create", "bridge_repair",
                 "--lease", "l-x"]) == 2
    assert "--lease resumes an agent of an existing run" in capsys.readouterr().err
