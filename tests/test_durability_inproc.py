"""Durability and hygiene details of issue 13, in process (real app, real files, autojump clock where it waits)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from server_helpers import served

from warren_sim.client import AgentClient, RetryPolicy, TransportError
from warren_sim.protocol.strict_json import MAX_BODY_BYTES, MAX_SAFE_INTEGER
from warren_sim.replay import replay_journal
from warren_sim.runtime import journal as journal_module
from warren_sim.runtime.journal import Journal


async def test_fsync_is_grouped_per_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--fsync: three accepts written in one tick wait for one fsync, not three."""
    calls = []
    real = os.fsync
    monkeypatch.setattr(journal_module.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    j = Journal(tmp_path / "run-1.jsonl", fsync=True)
    for i in range(3):
        j.append({"kind": "verdict", "n": i})
        j.write_through()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(j.durable)
    assert len(calls) == 1
    await j.durable()  # nothing new written: no fsync
    assert len(calls) == 1
    j.append({"kind": "verdict", "n": 3})
    j.write_through()
    await j.durable()
    assert len(calls) == 2
    j.close()


async def test_a_lease_pasted_into_a_command_is_not_echoed(autojump_clock, tmp_path: Path) -> None:
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"])
        token = await api.claim(run)
        status, env = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/observations?lease={token}&wait=5")
        status, receipt = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/commands?lease={token}",
                                         {"command_id": "c-1", "observation_id": env["observation_id"],
                                          "noop": token})
        assert status == 200 and receipt["status"] == "rejected"
        assert token not in receipt["detail"] and "<your lease>" in receipt["detail"]
        await api.call("DELETE", f"/v1/runs/{run}")
    assert token not in (tmp_path / "data" / f"{run}.jsonl").read_text()


async def test_refusals_say_allow_and_connection_close(autojump_clock, tmp_path: Path) -> None:
    async with served(tmp_path) as api:
        status, _ = await api.call("PUT", "/v1/runs/run-1")
        assert status == 405 and set(api.last.headers["Allow"].split(", ")) >= {"GET", "DELETE"}
        status, _ = await api.call("POST", "/v1/runs?scenario=bridge_repair", raw=b"{" + b" " * MAX_BODY_BYTES + b"}",
                                   headers={"Content-Type": "application/json"})
        assert status == 413 and api.last.headers["Connection"] == "close"
        status, _ = await api.call("POST", "/v1/runs?scenario=bridge_repair", raw=b"{}",
                                   headers={"Content-Type": "text/plain"})
        assert status == 415
        status, _ = await api.call("POST", "/v1/runs?scenario=bridge_repair", {},
                                   headers={"Origin": "http://evil.example"})
        assert status == 403
        status, runs = await api.call("GET", "/v1/runs")
        assert runs == {"runs": []}


async def test_openapi_states_the_integer_bounds(autojump_clock, tmp_path: Path) -> None:
    async with served(tmp_path) as api:
        _, doc = await api.call("GET", "/v1/openapi.json")
    bounds = {}
    for path in doc["paths"].values():
        for op in path.values():
            for p in op.get("parameters", []):
                if p.get("name") in ("seed", "after", "since"):
                    bounds[p["name"]] = (p["schema"].get("minimum"), p["schema"].get("maximum"))
    assert bounds == {"seed": (-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER), "after": (-1, MAX_SAFE_INTEGER),
                      "since": (-1, MAX_SAFE_INTEGER)}


def test_replay_of_a_journal_cut_right_after_an_adjudication(tmp_path: Path) -> None:
    """A kill right after an adjudication leaves a journal whose next batch is missing: it replays as far as it goes."""
    trace = tmp_path / "trace.jsonl"
    subprocess.run([sys.executable, "-m", "warren_sim.cli", "run", "bridge_repair", "--seed", "3", "--quiet",
                    "--trace", str(trace)], check=True, timeout=120)
    lines = trace.read_text().splitlines(keepends=True)
    kinds = [json.loads(line)["kind"] for line in lines]
    cut = [i for i in range(1, len(kinds)) if kinds[i] == "observation" and kinds[i - 1] != "observation"][3]
    cut_path = tmp_path / "cut.jsonl"
    cut_path.write_text("".join(lines[:cut]))
    result = replay_journal(cut_path)
    assert result.identical and result.records == cut and "cut short" in result.note
    done = subprocess.run([sys.executable, "-m", "warren_sim.cli", "replay", str(cut_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "cut short" in done.stdout


def test_the_sdk_retries_a_vanished_server_for_a_bound_then_says_so() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    retry = RetryPolicy(attempts=1, backoff=0.05, max_backoff=0.1, reconnect_s=0.5)
    with AgentClient.open(f"http://127.0.0.1:{port}", retry=retry) as client, \
            pytest.raises(TransportError) as caught:
        client.get_run("run-1")
    message = str(caught.value)
    assert "is the server running" in message and "0.5 s" in message
    tried = float(message.split(" tries over ")[1].split(" s")[0])
    assert 0.4 <= tried <= 0.5
