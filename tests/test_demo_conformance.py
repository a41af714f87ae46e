"""`warren demo`, `warren agent` and `warren conformance`, run as users run them: subprocesses against a
`warren serve --port 0` subprocess; plus the conformance checker in-process, on a healthy and a broken app."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import trio
from sdkhelpers import in_process

from warren_sim.conformance import RULES, format_report, run_conformance

PY = [sys.executable, "-m", "warren_sim.cli"]


def warren(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PY, *args], capture_output=True, text=True, timeout=timeout)


def test_demo_completes_over_http():
    """`warren demo` serves, drives engineer-1 over HTTP with the solution policy and ends completed (exit 0)."""
    result = warren("demo")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "WARREN demo: warren-agent/0 served at http://127.0.0.1:" in out
    assert "briefing revision 1" in out and "verified" in out
    assert "engineer-1#0 (start)" in out and '-> take {"item": "toolbox-1"}' in out and "accepted" in out
    assert "run-1 completed" in out
    assert "objective repair     completed  2/2" in out and "objective resupply   completed  3/3" in out
    assert "decisions" in out and "by engineer-1 over HTTP" in out


def test_conformance_passes_against_warren_serve(served):
    """`warren conformance URL` passes every rule against a `warren serve` subprocess and exits 0."""
    result = warren("conformance", served)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert sum(line.strip().startswith("PASS") for line in lines) == len(RULES)
    assert f"{len(RULES)} passed, 0 failed of {len(RULES)} rules" in result.stdout


def test_conformance_stops_at_the_first_connect_error():
    """`warren conformance` against a port where nothing listens: one clear line, exit 2, no report of 30 failures."""
    result = warren("conformance", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("warren conformance: cannot connect to http://127.0.0.1:9")
    assert "is a server running there?" in lines[0] and "Traceback" not in result.stderr


def test_agent_command_drives_a_served_run(served):
    """`warren agent URL --run --agent` drives engineer-1 with the solution policy until the run completes."""
    with httpx.Client(base_url=served, timeout=10) as http:
        run = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                        json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
    result = warren("agent", served, "--run", run, "--agent", "engineer-1", "--wait", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"claimed engineer-1 of {run}" in result.stdout
    assert "You are Sam the engineer" in result.stdout and '>>> take {"item": "toolbox-1"}  [accepted' in result.stdout
    last = result.stdout.rstrip().splitlines()[-1]
    assert last.startswith(f"{run} ended: completed (") and last.endswith(")"), last  # with the run's reason


def test_agent_command_reports_a_held_agent(served):
    """`warren agent` on an agent held by another lease exits 1 with the server's teaching detail."""
    with httpx.Client(base_url=served, timeout=10) as http:
        run = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                        json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
        http.post(f"/v1/runs/{run}/agents/engineer-1/claim")
        result = warren("agent", served, "--run", run, "--agent", "engineer-1")
        http.delete(f"/v1/runs/{run}")
    assert result.returncode == 1
    assert "409" in result.stderr and "held by another lease" in result.stderr


async def test_conformance_passes_in_process(autojump_clock):
    """The checker passes every rule against the app in-process (and every response fits its schema)."""
    async with in_process() as env:
        async with env.http() as http:
            results = await run_conformance("in-process", http=http)
    failed = [r for r in results if r.passed is not True]
    assert failed == [], format_report("in-process", results)
    judged = {r.rule: r.detail for r in results}
    assert int(judged["schemas"].split()[0]) > 40  # every response of the run was checked


async def test_conformance_fails_a_server_that_drops_the_protocol_header(autojump_clock):
    """A server whose responses lack X-Warren-Protocol fails that rule (the checker can fail)."""
    async with in_process() as env:
        inner = env.make_transport()

        class Stripping(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                response = await inner.handle_async_request(request)
                await response.aread()
                headers = [(k, v) for k, v in response.headers.items() if k.lower() != "x-warren-protocol"]
                return httpx.Response(response.status_code, headers=headers, content=response.content)

        async with httpx.AsyncClient(transport=Stripping(), base_url=env.url) as http:
            results = {r.rule: r for r in await run_conformance("stripping", http=http)}
        async with env.http() as checked:  # in_process() wants at least one schema-checked response
            await checked.get("/v1")
    assert results["header-on-every-response"].passed is False
    assert results["verdict-duplicate"].passed is True
    assert "FAIL  header-on-every-response" in format_report("stripping", list(results.values()))


async def test_conformance_passes_for_a_slow_client(autojump_clock):
    """A client that takes 1 s per request (a loaded machine) still passes every rule (issue 33, item 3).

    The checker's main run used to be unpaced: once `release` freed its only controlled agent, the run raced to
    its time limit and ended `failed` before the next claim arrived (410), failing 4 rules now and then.
    """
    async with in_process() as env:
        async with env.http() as http:
            async def one_second_late(request: httpx.Request) -> None:
                await trio.sleep(1)

            http.event_hooks = {**http.event_hooks, "request": [one_second_late]}
            results = await run_conformance("slow client", http=http)
    failed = [r for r in results if r.passed is not True]
    assert failed == [], format_report("slow client", results)


@pytest.mark.slow
def test_conformance_passes_fifty_times_in_a_row_against_one_fresh_server(served):
    """50 checks in a row against one `warren serve` subprocess over loopback: 50 passes, no flake (item 3)."""
    reports = []
    for _ in range(50):
        results = trio.run(run_conformance, served)
        if any(r.passed is not True for r in results):
            reports.append(format_report(served, results))
    assert reports == [], f"{len(reports)} of 50 checks failed; the first:\n{reports[0]}"
